// SPDX-License-Identifier: MIT
//! Links libsnowid: from SNOWID_LIB_DIR when it is set (a build tree, or an
//! install outside the linker's paths; the programs then find it there at
//! run time too), else where pkg-config says, else the linker's default paths.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SNOWID_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Ok(dir) = env::var("SNOWID_LIB_DIR") {
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    } else if let Ok(out) = Command::new("pkg-config").args(["--libs-only-L", "snowid"]).output() {
        if out.status.success() {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", dir);
                    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
                }
            }
        }
    }
    println!("cargo:rustc-link-lib=dylib=snowid");
}
