"""Knowledge bases: chunking, embeddings, vector storage and search."""
