"""Cluster metadata: the image handlers read, its stores (local file, ZooKeeper) and admin."""
