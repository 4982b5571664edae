#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardgate_fuzzkit::targets::text_pipeline::run(data));
