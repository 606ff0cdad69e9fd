"""Security pieces that need no server: TLS contexts, JAAS values, SCRAM credentials, principals.

The server wires them into its listeners (``strom.server.secure_connection``); inter-broker
clients use ``strom.security.client``. Nothing here imports asyncio or the server.
"""
