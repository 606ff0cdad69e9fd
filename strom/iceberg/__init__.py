"""Iceberg topics: the committed records of a topic kept as an Apache Iceberg table as well as a log.

``table`` knows the table (schema, catalog, the offsets a snapshot covers), ``segments`` reads a
partition's committed records from its segment files, ``worker`` translates in a worker process
and ``translator`` is the broker's service that schedules it for the partitions this broker leads.
"""
