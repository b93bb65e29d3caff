//! The workspace's tree: quotas, depth, walks, and offsets a guest chose.

use super::*;

fn quota(bytes: u64, files: u64) -> Quota {
    Quota { bytes, files }
}

#[test]
fn host_paths_must_be_plain_relative_names() {
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a//b",
        "./a",
        "a/",
        "a\\b",
        "a\0",
    ] {
        assert!(split_path(bad).is_err(), "{bad:?} was accepted");
    }
    assert_eq!(split_path("a/b.csv"), Ok(vec!["a", "b.csv"]));
}

#[test]
fn writes_count_against_both_quotas_and_fail_whole() {
    let workspace = Workspace::new(quota(10, 3));
    workspace.write("a/b", b"12345").unwrap();
    assert_eq!(workspace.usage(), (5, 2));
    assert!(matches!(
        workspace.write("c", b"123456"),
        Err(WorkspaceError::QuotaBytes { .. })
    ));
    workspace.write("a/b", b"1234567890").unwrap();
    assert_eq!(workspace.usage(), (10, 2));
    assert!(matches!(
        workspace.write("x/y", b""),
        Err(WorkspaceError::QuotaFiles { .. })
    ));
    assert_eq!(workspace.usage(), (10, 2));
    workspace.remove("a").unwrap();
    assert_eq!(workspace.usage(), (0, 0));
    assert!(workspace.list().is_empty());
}

#[test]
fn trees_are_at_most_max_depth_deep() {
    let workspace = Workspace::new(quota(1 << 20, 10_000));
    let deepest = vec!["d"; MAX_DEPTH - 1].join("/");
    workspace
        .write(&format!("{deepest}/leaf.txt"), b"x")
        .unwrap();
    assert!(matches!(
        workspace.write(&format!("{deepest}/d/leaf.txt"), b"x"),
        Err(WorkspaceError::InvalidPath(_))
    ));
    workspace.write("a.txt", b"y").unwrap();
    let listed: Vec<String> = workspace
        .list()
        .into_iter()
        .map(|entry| entry.path)
        .collect();
    assert_eq!(
        listed,
        vec!["a.txt".to_owned(), format!("{deepest}/leaf.txt")]
    );
    let mut tree = workspace.lock();
    let parent = tree.resolve(ROOT, &deepest).unwrap();
    let more = tree
        .create(parent, "more", Kind::Dir(BTreeMap::new()))
        .unwrap();
    assert_eq!(
        tree.create(more, "x", Kind::File(Vec::new())),
        Err(errno::NAMETOOLONG)
    );
    // Moving a subtree counts its own levels: two levels fit under depth 126, not 127.
    let top = tree
        .create(ROOT, "top", Kind::Dir(BTreeMap::new()))
        .unwrap();
    tree.create(top, "inner", Kind::Dir(BTreeMap::new()))
        .unwrap();
    let at_126 = tree.node(parent).unwrap().parent;
    assert_eq!(
        tree.rename(ROOT, "top", parent, "top"),
        Err(errno::NAMETOOLONG)
    );
    assert_eq!(tree.rename(ROOT, "top", at_126, "top"), Ok(()));
    drop(tree);
    workspace.remove("d").unwrap();
    assert_eq!(workspace.usage(), (1, 1));
}

#[test]
fn guest_walks_stay_below_the_root() {
    let workspace = Workspace::new(quota(100, 10));
    workspace.write("d/f", b"x").unwrap();
    let tree = workspace.lock();
    let d = tree.resolve(ROOT, "d").unwrap();
    assert_eq!(tree.resolve(d, "../d/f"), tree.resolve(ROOT, "d/f"));
    assert_eq!(tree.resolve(ROOT, ".."), Err(errno::NOTCAPABLE));
    assert_eq!(tree.resolve(d, "../../etc"), Err(errno::NOTCAPABLE));
    assert_eq!(tree.resolve(ROOT, "/etc"), Err(errno::NOTCAPABLE));
    assert_eq!(tree.resolve(ROOT, "d/f/"), Err(errno::NOTDIR));
}

/// A workspace holding `other.bin` (5 bytes, so a wrapped quota sum would look small) and
/// an empty `f.bin`, with `f.bin`'s inode.
fn with_other_file(bytes: u64) -> (Workspace, u64) {
    let workspace = Workspace::new(quota(bytes, 10));
    workspace.write("other.bin", b"12345").unwrap();
    workspace.write("f.bin", b"").unwrap();
    let ino = workspace.lock().resolve(ROOT, "f.bin").unwrap();
    (workspace, ino)
}

fn capacity(tree: &Tree, ino: u64) -> usize {
    match &tree.node(ino).unwrap().kind {
        Kind::File(data) => data.capacity(),
        Kind::Dir(_) => panic!("not a file"),
    }
}

#[test]
fn offsets_at_the_top_of_u64_never_wrap_the_quota_sum() {
    let (workspace, ino) = with_other_file(1 << 20);
    let mut tree = workspace.lock();
    // The attack: 1 byte at 2^64 - 2 made `offset + len` and the quota sum wrap.
    for offset in [u64::MAX, u64::MAX - 1, u64::MAX - 5, MAX_OFFSET] {
        assert_eq!(tree.write_at(ino, offset, &[b"x"]), Err(errno::FBIG));
    }
    assert_eq!(
        tree.write_at(ino, MAX_OFFSET - 1, &[b"x"]),
        Err(errno::NOSPC)
    );
    assert_eq!(tree.write_at(ino, 1 << 20, &[b"x"]), Err(errno::NOSPC));
    for len in [u64::MAX, MAX_OFFSET + 1] {
        assert_eq!(tree.set_len(ino, len), Err(errno::FBIG));
    }
    assert_eq!(tree.set_len(ino, MAX_OFFSET), Err(errno::NOSPC));
    // Writing nothing, however far out, stores nothing.
    assert_eq!(tree.write_at(ino, u64::MAX, &[]), Ok(u64::MAX));
    assert_eq!(tree.node(ino).unwrap().size(), 0);
    assert_eq!((tree.bytes, tree.entries), (5, 2));
    // Buffers of one write land one after another.
    assert_eq!(tree.write_at(ino, 2, &[b"ab", b"", b"cd"]), Ok(6));
    drop(tree);
    assert_eq!(workspace.read("f.bin").unwrap(), b"\0\0abcd");
    assert_eq!(workspace.usage(), (11, 2));
}

#[test]
fn an_unlimited_quota_cannot_make_the_host_abort() {
    // No quota stops these: the host's allocator does, as ENOSPC rather than an abort.
    let (workspace, ino) = with_other_file(u64::MAX);
    let mut tree = workspace.lock();
    assert_eq!(
        tree.write_at(ino, MAX_OFFSET - 1, &[b"x"]),
        Err(errno::NOSPC)
    );
    assert_eq!(tree.set_len(ino, 1 << 62), Err(errno::NOSPC));
    assert_eq!((tree.bytes, tree.node(ino).unwrap().size()), (5, 0));
}

#[test]
fn file_buffers_hold_no_more_than_the_quota_lets_them_grow_to() {
    let (workspace, ino) = with_other_file(1000);
    let mut tree = workspace.lock();
    for at in 0..995 {
        tree.write_at(ino, at, &[b"x"]).unwrap();
        assert!(capacity(&tree, ino) <= 995, "{}", capacity(&tree, ino));
    }
    assert_eq!(tree.write_at(ino, 995, &[b"x"]), Err(errno::NOSPC));
    // A truncated file gives its memory back: else writing and truncating many files
    // would hold many quotas' worth of host memory.
    tree.set_len(ino, 0).unwrap();
    assert!(capacity(&tree, ino) < 64, "{}", capacity(&tree, ino));
    assert_eq!(tree.bytes, 5);
}

#[test]
fn a_frozen_tree_refuses_every_change_and_shows_fixed_times() {
    let workspace = Workspace::new(quota(u64::MAX, u64::MAX));
    workspace.write("lib/os.py", b"import sys\n").unwrap();
    workspace.freeze();
    let mut tree = workspace.lock();
    let ino = tree.resolve(ROOT, "lib/os.py").unwrap();
    let lib = tree.resolve(ROOT, "lib").unwrap();
    let next_ino = tree.next_ino;
    tree.touch(ino);
    assert_eq!(tree.write_at(ino, 0, &[b"x"]), Err(errno::ROFS));
    assert_eq!(tree.set_len(ino, 0), Err(errno::ROFS));
    assert_eq!(
        tree.create(lib, "new.py", Kind::File(Vec::new())),
        Err(errno::ROFS)
    );
    assert_eq!(tree.remove(lib, "os.py", false), Err(errno::ROFS));
    assert_eq!(tree.rename(lib, "os.py", ROOT, "os.py"), Err(errno::ROFS));
    assert_eq!(
        tree.next_ino, next_ino,
        "a refused create used an inode number"
    );
    for node in tree.nodes.values() {
        assert_eq!((node.accessed_ns, node.modified_ns), (FROZEN_NS, FROZEN_NS));
    }
    drop(tree);
    assert_eq!(workspace.read("lib/os.py").unwrap(), b"import sys\n");
}
