"""The search engine: corpus store, TF-IDF index and query language. Knows nothing about Slack."""
