module github.com/coder/hnsw

go 1.22
