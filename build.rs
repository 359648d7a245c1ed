//! Builds the pinned ggml with CMake and links it statically into ggml-rs.
//!
//! * Source: `vendor/ggml` (fetched by `scripts/fetch-ggml.sh`, which this
//!   script runs when the folder is missing), or the tree named by the
//!   environment variable `GGML_RS_GGML_DIR`.
//! * ggml is always built in Release, whatever cargo's profile, and into one
//!   folder per configuration under `target/ggml-build/`, so debug, test and
//!   release builds of our crate share it instead of rebuilding ggml.
//! * Cargo features pick the backends: CPU always, `rpc` (default), `cuda`,
//!   `vulkan`, `metal`; `native` (default) tunes the CPU code for this machine.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn feature(name: &str) -> bool {
    env::var_os(format!("CARGO_FEATURE_{}", name.to_uppercase())).is_some()
}

fn on_off(b: bool) -> &'static str {
    if b {
        "ON"
    } else {
        "OFF"
    }
}

/// The cargo target folder: OUT_DIR is `<target>/<profile>/build/<pkg>/out`.
fn target_dir(out_dir: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    out_dir
        .ancestors()
        .find(|p| p.file_name().map(|n| n == "target").unwrap_or(false))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.join("ggml"))
}

/// ggml's CPU instruction options for an x86-64 microarchitecture level
/// (the psABI's: v2 SSE4.2, v3 AVX2/FMA/F16C/BMI2, v4 AVX-512 F/CD/VL/DQ/BW).
fn x86_64_level(level: &str) -> Option<Vec<(&'static str, bool)>> {
    let rank = match level {
        "x86-64-v2" => 2,
        "x86-64-v3" => 3,
        "x86-64-v4" => 4,
        _ => return None,
    };
    let mut flags = vec![("GGML_SSE42", true)];
    for o in ["GGML_AVX", "GGML_AVX2", "GGML_BMI2", "GGML_FMA", "GGML_F16C"] {
        flags.push((o, rank >= 3));
    }
    flags.push(("GGML_AVX512", rank >= 4));
    for o in ["GGML_AVX_VNNI", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"] {
        flags.push((o, false));
    }
    Some(flags)
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());

    println!("cargo:rerun-if-env-changed=GGML_RS_GGML_DIR");
    println!("cargo:rerun-if-env-changed=GGML_RS_VULKAN_INCLUDE");
    println!("cargo:rerun-if-env-changed=GGML_RS_CUDA_ARCHS");
    println!("cargo:rerun-if-env-changed=GGML_RS_CUDA_COMPRESSION");
    println!("cargo:rerun-if-changed=cmake/ggml/CMakeLists.txt");
    println!("cargo:rerun-if-changed=cmake/ggml/shim.cpp");
    println!("cargo:rerun-if-changed=build.rs");

    let ggml_dir = match env::var_os("GGML_RS_GGML_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let d = manifest.join("vendor/ggml");
            // The script returns at once when the tree's stamp matches the
            // pinned version and our current patches; otherwise it fetches
            // and patches afresh (a tree fetched before a patch was added).
            let status = Command::new("bash")
                .arg(manifest.join("scripts/fetch-ggml.sh"))
                .status()
                .expect("running scripts/fetch-ggml.sh");
            assert!(status.success(), "scripts/fetch-ggml.sh failed");
            println!("cargo:rerun-if-changed=scripts/fetch-ggml.sh");
            println!("cargo:rerun-if-changed=vendor/ggml/.ggml-rs-stamp");
            // Our patches change the fetched sources in place.
            println!("cargo:rerun-if-changed=scripts/patches");
            d
        }
    };
    assert!(
        ggml_dir.join("include/ggml.h").exists(),
        "no ggml source tree at {}",
        ggml_dir.display()
    );

    let native = feature("native");
    let (rpc, cuda, vulkan, metal) = (feature("rpc"), feature("cuda"), feature("vulkan"), feature("metal"));
    // A portable build's x86-64 level (make dist): GGML_RS_CPU_LEVEL.
    println!("cargo:rerun-if-env-changed=GGML_RS_CPU_LEVEL");
    let level = if native { None } else { env::var("GGML_RS_CPU_LEVEL").ok().filter(|l| !l.is_empty()) };
    let level_flags = level.as_deref().map(|l| {
        x86_64_level(l).unwrap_or_else(|| panic!("GGML_RS_CPU_LEVEL={l}: x86-64-v2, x86-64-v3 or x86-64-v4"))
    });
    let key = format!(
        "n{}r{}c{}v{}m{}{}",
        native as u8,
        rpc as u8,
        cuda as u8,
        vulkan as u8,
        metal as u8,
        level.as_deref().map(|l| format!("-{l}")).unwrap_or_default()
    );
    let build_dir = target_dir(&out_dir).join("ggml-build").join(key);

    let mut cfg = cmake::Config::new(manifest.join("cmake/ggml"));
    cfg.out_dir(&build_dir)
        .profile("Release")
        .define("GGML_RS_GGML_DIR", &ggml_dir)
        .define("BUILD_SHARED_LIBS", "OFF")
        .define("CMAKE_POSITION_INDEPENDENT_CODE", "ON")
        .define("GGML_NATIVE", on_off(native))
        .define("GGML_OPENMP", "OFF")
        // tinyBLAS (llamafile sgemm) for CPU matmuls, as llama.cpp builds ggml.
        .define("GGML_LLAMAFILE", "ON")
        .define("GGML_RPC", on_off(rpc))
        .define("GGML_CUDA", on_off(cuda))
        .define("GGML_VULKAN", on_off(vulkan))
        .define("GGML_METAL", on_off(metal))
        .define("GGML_BLAS", "OFF")
        .define("GGML_BUILD_TESTS", "OFF")
        .define("GGML_BUILD_EXAMPLES", "OFF")
        .define("GGML_BACKEND_DL", "OFF")
        .define("CMAKE_INSTALL_LIBDIR", "lib")
        // The cmake crate forwards cargo's debug flags; keep ggml optimised.
        .cflag("-O3")
        .cxxflag("-O3")
        // No STB_GNU_UNIQUE symbols (static locals of inline functions):
        // the loader merges those across copies, and objcopy cannot make
        // them local, so the static library could not keep its ggml private
        // (scripts/private-ggml.sh). They become ordinary weak symbols.
        .cxxflag("-fno-gnu-unique");
    for (option, on) in level_flags.into_iter().flatten() {
        cfg.define(option, on_off(on));
    }
    if Command::new("ninja").arg("--version").output().is_ok() {
        cfg.generator("Ninja");
    }
    // The GPU generations to compile for (CMake's list, e.g. "90" for
    // Hopper only: scripts/build-cuda.sh); unset, ggml's own default, which
    // asks the machine's GPU ("native") and fails on one without.
    if let (true, Some(archs)) = (cuda, env::var_os("GGML_RS_CUDA_ARCHS")) {
        cfg.define("CMAKE_CUDA_ARCHITECTURES", archs);
    }
    // nvcc's compression of the kernels (none, speed, balance, size: ggml's
    // GGML_CUDA_COMPRESSION_MODE, default size); none where the binary is
    // compressed afterwards, which xz does better (scripts/build-cuda.sh).
    if let (true, Some(mode)) = (cuda, env::var_os("GGML_RS_CUDA_COMPRESSION")) {
        cfg.define("GGML_CUDA_COMPRESSION_MODE", mode);
    }
    if metal {
        cfg.define("GGML_METAL_EMBED_LIBRARY", "ON");
    }
    // Vulkan headers newer than the system's (Debian bookworm's lack what
    // this ggml uses; scripts/vulkan-headers.sh fetches trixie's).
    if let (true, Some(inc)) = (vulkan, env::var_os("GGML_RS_VULKAN_INCLUDE")) {
        cfg.define("Vulkan_INCLUDE_DIR", inc);
    }
    let dst = cfg.build();

    let lib = dst.join("lib");
    println!("cargo:rustc-link-search=native={}", lib.display());
    // ggml-rs-shim: our C++ helpers over ggml internals (cmake/ggml/shim.cpp).
    let mut libs = vec!["ggml-rs-shim", "ggml", "ggml-base", "ggml-cpu"];
    if rpc {
        libs.insert(2, "ggml-rpc");
    }
    if cuda {
        libs.insert(2, "ggml-cuda");
    }
    if vulkan {
        libs.insert(2, "ggml-vulkan");
    }
    if metal {
        libs.insert(2, "ggml-metal");
    }
    for l in &libs {
        println!("cargo:rustc-link-lib=static={l}");
    }
    if cuda {
        for l in ["cudart", "cublas", "cublasLt", "cuda"] {
            println!("cargo:rustc-link-lib={l}");
        }
    }
    if vulkan {
        println!("cargo:rustc-link-lib=vulkan");
    }
    if metal {
        for f in ["Foundation", "Metal", "MetalKit"] {
            println!("cargo:rustc-link-lib=framework={f}");
        }
    }
    let target = env::var("TARGET").unwrap_or_default();
    if target.contains("apple") {
        println!("cargo:rustc-link-lib=c++");
    } else {
        println!("cargo:rustc-link-lib=stdc++");
    }
    // The shared library's soname: libggml_rs.so.<major> (for 0.x,
    // .so.0.<minor>, as 0.x minors break the ABI), so programs linked
    // against it find the compatible release after `make install`.
    if !target.contains("apple") && !target.contains("windows") {
        let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
        let minor = env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
        let abi = if major == "0" { format!("0.{minor}") } else { major };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libggml_rs.so.{abi}");
    }
    // Where the ggml headers are, for our own tests and tools.
    println!("cargo:include={}", ggml_dir.join("include").display());
    println!("cargo:rustc-env=GGML_RS_GGML_INCLUDE={}", ggml_dir.join("include").display());
}
