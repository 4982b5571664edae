#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shardgate_fuzzkit::targets::video_decode::run(data));
