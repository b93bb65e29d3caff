//! Two `cordon serve` replicas on one PostgreSQL database (`--replica-address`, a 1 s
//! lease): forwarding, event streams served from the shared log, and what happens when
//! one is killed. The client side is `tests/e2e/replica_routing.py` (httpx); it kills
//! replica A itself, at the moment the scenario needs, given A's pid.

use crate::serve::Server;

/// A free loopback port: a replica must know its own address before it listens.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

fn replica(db: &str) -> Server {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let address = format!("http://{addr}");
    Server::start(&[
        "serve",
        "--db",
        db,
        "--addr",
        &addr,
        "--replica-address",
        &address,
        "--replica-lease",
        "1s",
    ])
}

#[test]
fn a_second_replica_forwards_streams_and_ends_what_a_killed_one_held() {
    let cluster = crate::postgres_cluster::PgCluster::start();
    let db = cluster.create_database("replicas");
    let a = replica(&db);
    let b = replica(&db);
    let pid_a = a.pid().to_string();
    crate::e2e_script("replica_routing.py", &[&a.url, &b.url, &pid_a]);
    // A was killed by the script; B stops normally.
    drop(b);
    drop(a);
}
