//go:build cgo && ggml_cuda

package backend

// The library built with ggml's CUDA backend (go build -tags ggml_cuda):
// pkg-config's ggml-rs-cuda, installed, or, inside this repository,
// target/pkgconfig's, pointing at the cached build (make cuda-build:
// kernels for Hopper, made with NVIDIA's PyPI toolkit; docs/notes/cuda.md).
// The CUDA runtime, cuBLAS and the driver are linked dynamically: the
// machine that runs the program provides them.

/*
#cgo pkg-config: --static ggml-rs-cuda
*/
import "C"
