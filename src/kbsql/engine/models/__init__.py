"""Model runtimes and providers: embeddings (MiniLM on ONNX Runtime, e5, remote APIs), rerankers,
chat providers (`chat/`), their registries (`providers.py`) and the one HTTP client they share."""
