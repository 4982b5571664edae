//! Tests of the approximate prefix tree: block hashing, matching runs, LRU order (leaves go
//! first), TTL expiry, tenant removal, and byte accounting that returns to zero.

use super::*;

const BLOCK: usize = 4;

fn tokens(range: std::ops::Range<u32>) -> Vec<u32> {
    range.collect()
}

fn hashes(tokens: &[u32]) -> Vec<u64> {
    let mut out = Vec::new();
    hash_blocks(tokens, BLOCK, &mut out);
    out
}

/// Matched blocks per tenant, with tenant `t` as candidate `t`.
fn matched(tree: &PrefixTree, prompt: &[u32], now_s: u32, tenant_count: u32) -> Vec<u32> {
    let candidate_of_tenant: Vec<u32> = (0..tenant_count).collect();
    let mut blocks = vec![0; tenant_count as usize];
    tree.match_blocks(&hashes(prompt), now_s, &candidate_of_tenant, &mut blocks);
    blocks
}

#[test]
fn hash_blocks_cases() {
    let base = tokens(0..16);
    let mut changed_first = base.clone();
    changed_first[0] = 999;
    let mut changed_last = base.clone();
    changed_last[15] = 999;
    let base_hashes = hashes(&base);
    assert_eq!(base_hashes.len(), 4, "full blocks only");
    assert_eq!(hashes(&tokens(0..18)), base_hashes, "a partial tail block is not indexed");
    assert_eq!(hashes(&tokens(0..3)), Vec::<u64>::new(), "shorter than a block");
    assert_eq!(&hashes(&tokens(0..8))[..], &base_hashes[..2], "a prefix has the same leading hashes");
    let first = hashes(&changed_first);
    assert!(first.iter().zip(&base_hashes).all(|(a, b)| a != b), "a changed first block changes every hash");
    assert_eq!(&hashes(&changed_last)[..3], &base_hashes[..3], "a changed last block changes only the last hash");
    let mut unique = base_hashes.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 4, "blocks of one prompt hash apart");
}

#[test]
fn match_runs_cases() {
    let mut tree = PrefixTree::new(usize::MAX, 100);
    tree.insert(&hashes(&tokens(0..16)), 0, 0); // tenant 0: blocks 0..4
    tree.insert(&hashes(&tokens(0..8)), 1, 0); // tenant 1: blocks 0..2
    let cases: &[(&str, Vec<u32>, Vec<u32>)] = &[
        ("whole prompt", tokens(0..16), vec![4, 2]),
        ("longer prompt", tokens(0..40), vec![4, 2]),
        ("shared first block only", [tokens(0..4), tokens(100..112)].concat(), vec![1, 1]),
        ("different first block", tokens(50..66), vec![0, 0]),
        ("shorter than a block", tokens(0..3), vec![0, 0]),
    ];
    for (name, prompt, expected) in cases {
        assert_eq!(&matched(&tree, prompt, 1, 2), expected, "{name}");
    }
}

#[test]
fn a_run_stops_at_the_first_missing_block() {
    let mut tree = PrefixTree::new(usize::MAX, 100);
    let prompt = tokens(0..12);
    let prompt_hashes = hashes(&prompt);
    tree.insert(&prompt_hashes, 0, 0);
    tree.insert(&[prompt_hashes[0], prompt_hashes[2]], 1, 0); // tenant 1 lacks block 1
    assert_eq!(matched(&tree, &prompt, 1, 2), vec![3, 1]);
}

#[test]
fn budget_evicts_least_recent_leaves_first() {
    let long = tokens(0..40); // 10 blocks
    let mut tree = PrefixTree::new(4 * NODE_SIZE_BYTES, 100);
    tree.insert(&hashes(&long), 0, 0);
    assert_eq!(tree.node_count(), 4);
    assert!(tree.size_bytes() <= 4 * NODE_SIZE_BYTES);
    assert_eq!(matched(&tree, &long, 0, 1), vec![4], "the root-most blocks survive");
    // A newer prompt pushes out the older one, leaves first.
    tree.insert(&hashes(&tokens(1000..1008)), 0, 1);
    assert_eq!(tree.node_count(), 4);
    assert_eq!(matched(&tree, &long, 1, 1), vec![2]);
    assert_eq!(matched(&tree, &tokens(1000..1008), 1, 1), vec![2]);
}

#[test]
fn expiry_cases() {
    let prompt = tokens(0..8);
    let mut tree = PrefixTree::new(usize::MAX, 10);
    tree.insert(&hashes(&prompt), 0, 100);
    tree.insert(&hashes(&prompt), 1, 105);
    assert_eq!(matched(&tree, &prompt, 109, 2), vec![2, 2], "both live");
    assert_eq!(matched(&tree, &prompt, 110, 2), vec![0, 2], "tenant 0 past its TTL is ignored");
    tree.expire(110);
    assert_eq!(tree.node_count(), 2, "nodes live while any tenant is");
    tree.insert(&hashes(&prompt), 1, 111);
    assert_eq!(tree.tenant_node_count(0), 0, "a touch drops expired stamps");
    assert_eq!(tree.tenant_node_count(1), 2);
    tree.expire(121);
    assert_eq!((tree.node_count(), tree.size_bytes(), tree.tenant_node_count(1)), (0, 0, 0));
}

#[test]
fn remove_tenant_frees_what_only_it_held() {
    let mut tree = PrefixTree::new(usize::MAX, 100);
    tree.insert(&hashes(&tokens(0..16)), 0, 0);
    tree.insert(&hashes(&tokens(0..8)), 1, 0);
    tree.insert(&hashes(&tokens(0..8)), 2, 0);
    assert_eq!(tree.node_count(), 4);
    tree.remove_tenant(0);
    assert_eq!((tree.node_count(), tree.tenant_node_count(0)), (2, 0));
    assert_eq!(matched(&tree, &tokens(0..16), 1, 3), vec![0, 2, 2]);
    tree.remove_tenant(1);
    tree.remove_tenant(2);
    assert_eq!((tree.node_count(), tree.size_bytes()), (0, 0), "bytes return to zero");
    tree.insert(&hashes(&tokens(0..8)), 0, 1);
    assert_eq!(matched(&tree, &tokens(0..8), 1, 1), vec![2], "freed nodes are reused");
}

#[test]
fn many_tenants_on_one_node_are_counted() {
    let mut tree = PrefixTree::new(usize::MAX, 100);
    let prompt = tokens(0..4);
    for tenant in 0..5 {
        tree.insert(&hashes(&prompt), tenant, 0);
    }
    assert_eq!(tree.node_count(), 1);
    assert_eq!(tree.size_bytes(), NODE_SIZE_BYTES + 4 * STAMP_SIZE_BYTES);
    assert_eq!(matched(&tree, &prompt, 0, 5), vec![1; 5]);
    tree.remove_tenant(0); // the inline stamp: another takes its place
    assert_eq!(matched(&tree, &prompt, 0, 5), vec![0, 1, 1, 1, 1]);
}
