"""``strom console``: a web console for a Kafka cluster (strom or Apache Kafka).

It is a client like the CLI tools: every figure comes from the Kafka protocol (confluent-kafka's
AdminClient and a Consumer that never joins a group), plus optional Prometheus endpoints. Pages are
rendered on the server (Jinja2, autoescaped: message bytes are untrusted); the only script refreshes
marked fragments of a page, so it works offline and without a build step.

    cluster.py   the Kafka access layer (one object per console, thread-safe calls)
    sampler.py   log end and committed offsets sampled over time: rates and lag history
    render.py    message bytes as JSON, text or hex; SVG line charts
    app.py       the HTTP server (stdlib, one thread per request) and its routes
"""
