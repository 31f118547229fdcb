"""JMFTS on FAISS: the durable, access-controlled memory every agent shares.

SQLite (WAL) holds documents, chunk vectors, the FTS5 index, principals, hashed tokens,
grants and bitemporal triples; a FAISS index is derived from the stored vectors. The
component for a supervisor is :class:`home.jmfts.server.JmftsServer`; the HTTP surface is
:func:`home.jmfts.app.create_app`; ``home jmfts serve`` runs it alone.
"""
