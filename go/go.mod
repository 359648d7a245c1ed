module github.com/ggml-rs/ggml-rs/go

go 1.23
