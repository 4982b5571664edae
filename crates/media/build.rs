//! Compiles the C shim around libjpeg (`src/decode/libjpeg_shim.c`) against the headers and
//! `jconfig.h` mozjpeg-sys generates, so the struct layouts the shim sees are the library's.

fn main() {
    let shim = "src/decode/libjpeg_shim.c";
    println!("cargo:rerun-if-changed={shim}");
    let include = std::env::var_os("DEP_JPEG_INCLUDE").expect("mozjpeg-sys exports its include directories");
    let mut build = cc::Build::new();
    build.file(shim).warnings(true).extra_warnings(true);
    for dir in std::env::split_paths(&include) {
        build.include(dir);
    }
    build.compile("shardgate_libjpeg_shim");
}
