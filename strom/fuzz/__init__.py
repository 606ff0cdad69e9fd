"""Fuzzing strom's request path, its record and compression decoders, and its storage recovery.

``python -m strom.fuzz <target> --runs N`` runs one coverage-guided target under atheris
(libFuzzer); ``python -m strom.fuzz replay <target> FILE...`` replays inputs without atheris, as
the regression tests in tests/fuzz do. Targets (strom.fuzz.targets):

- ``frame``: a byte stream cut into random chunks through FrameDecoder, then request headers;
- ``decode``: a request frame through the dispatcher's decoders (kio-driven codec and the
  hand-written Produce decoder, which is also checked against the generic one);
- ``broker``: a request frame through Dispatcher.handle_frame/encode of a real Broker running
  in this process on its own event loop, with a real data directory;
- ``records``: a producer's record set through batch validation, decompression with the topic's
  bound, record checks and the append to a real log;
- ``storage``: the files of a partition directory and its log dir, then recovery on open.

What counts as a bug (a Finding): any exception outside the documented error path
(DecodeError / CloseConnection / KafkaError, which become an error code or a closed
connection), an ERROR logged by strom, a response that does not decode as the API's response,
an answer that waits longer than the request allows, or output past a stated bound.
``python -m strom.fuzz storage-campaign`` corrupts the data directory of a real broker process
(tests/broker_process.py's way) and checks that it starts or refuses with a message.

Seeds are requests captured from confluent-kafka, kafka-python, aiokafka and kcat
(``python -m strom.fuzz capture``); they and the inputs that found bugs live in
tests/fuzz/corpus.
"""
