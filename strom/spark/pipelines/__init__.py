"""Example Spark pipelines over strom topics (runnable modules, spark-submit-able files)."""
