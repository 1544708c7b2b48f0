"""localcluster layer."""
