use super::*;

fn facts(hosts: usize) -> TransportFacts {
    TransportFacts {
        hosts,
        ..TransportFacts::default()
    }
}

fn job(hosts: usize, transport: Transport) -> Job {
    Job {
        hosts,
        ranks: hosts * 2,
        transport: TransportDecision {
            transport,
            why: "test".into(),
        },
    }
}

#[test]
fn one_host_needs_no_network_whatever_the_variables_say() {
    let f = TransportFacts {
        nccl_net: Some("IB".into()),
        ib_devices: 4,
        ..facts(1)
    };
    assert_eq!(decide_transport(&f).transport, Transport::SingleHost);
}

#[test]
fn nccl_net_names_the_network_first() {
    for (net, want) in [
        ("Socket", Transport::Socket),
        ("socket", Transport::Socket),
        ("IB", Transport::Ib),
        ("AWS Libfabric", Transport::Plugin("AWS Libfabric".into())),
    ] {
        let f = TransportFacts {
            nccl_net: Some(net.into()),
            ib_devices: 2,
            ..facts(2)
        };
        let d = decide_transport(&f);
        assert_eq!(d.transport, want, "{net}");
        assert_eq!(d.why, format!("NCCL_NET={net}"));
    }
}

#[test]
fn ib_disable_leaves_sockets_and_ib_devices_mean_ib() {
    let off = TransportFacts {
        ib_disable: Some("1".into()),
        ib_devices: 2,
        ..facts(2)
    };
    assert_eq!(decide_transport(&off).transport, Transport::Socket);
    assert_eq!(decide_transport(&off).why, "NCCL_IB_DISABLE=1");
    let on = TransportFacts {
        ib_disable: Some("0".into()),
        ib_devices: 2,
        ..facts(2)
    };
    assert_eq!(decide_transport(&on).transport, Transport::Ib);
    assert_eq!(decide_transport(&facts(3)).transport, Transport::Socket);
}

fn knobs(j: &Job) -> Vec<Knob> {
    env_candidates(j).into_iter().map(|c| c.knob).collect()
}

#[test]
fn socket_knobs_on_sockets_ib_knobs_on_ib_neither_on_one_host() {
    let one = knobs(&job(1, Transport::SingleHost));
    assert!(one.iter().all(|k| *k == Knob::BufferSize), "{one:?}");
    let sock = knobs(&job(2, Transport::Socket));
    assert!(sock.contains(&Knob::SocketThreads));
    assert!(!sock.contains(&Knob::IbQpsPerConnection));
    let ib = knobs(&job(2, Transport::Ib));
    assert!(ib.contains(&Knob::IbQpsPerConnection) && ib.contains(&Knob::NetGdrLevel));
    assert!(!ib.contains(&Knob::SocketThreads));
    let plugin = knobs(&job(2, Transport::Plugin("x".into())));
    assert_eq!(plugin, one);
}

#[test]
fn socket_pairs_stay_within_nccls_limit() {
    for (s, t) in SOCKET_PAIRS {
        assert!(s * t <= 64 && t <= 16, "{s}x{t}");
    }
}

#[test]
fn env_flags_parse_or_say_what_to_write() {
    let u: UserEnv = "NCCL_BUFFSIZE=2097152,8388608".parse().unwrap();
    assert_eq!(u.values, ["2097152", "8388608"]);
    let u: UserEnv = "NCCL_SOCKET_IFNAME==eth0".parse().unwrap();
    assert_eq!(u.values, ["=eth0"]);
    for (bad, want) in [
        ("NCCL_BUFFSIZE", "has no '='"),
        ("1X=2", "not an environment variable name"),
        ("NCCL-X=2", "not an environment variable name"),
        ("=2", "not an environment variable name"),
        ("NCCL_X=", "empty value"),
        ("NCCL_X=1,,2", "empty value"),
        ("NCCL_TUNER_PLUGIN=/x.so", "sets NCCL_TUNER_PLUGIN itself"),
        ("COLLBENCH_TUNER_PLUGIN=/x.so", "itself"),
    ] {
        let e = bad.parse::<UserEnv>().unwrap_err();
        assert!(e.contains(want), "{bad}: {e}");
        assert!(!e.contains('\n'));
    }
}

#[test]
fn the_plan_has_one_row_per_candidate_with_its_ops() {
    let user: UserEnv = "NCCL_BUFFSIZE=2097152,4194304".parse().unwrap();
    let plan = Plan::new(job(2, Transport::Socket), &[user]);
    let ops = [Collective::AllReduce, Collective::Broadcast];
    let rows = plan.rows(&ops, Some(16));
    let ring_ll = rows
        .iter()
        .find(|r| r.setting.to_string() == "ring/ll")
        .unwrap();
    assert_eq!(ring_ll.ops, ops);
    let tree = rows
        .iter()
        .find(|r| r.setting.to_string() == "tree/ll")
        .unwrap();
    assert_eq!(tree.ops, [Collective::AllReduce]);
    let forbidden: Vec<_> = rows.iter().filter(|r| !r.measured).collect();
    assert_eq!(forbidden.len(), 2, "32 and 64 channels");
    assert!(forbidden[0].why.contains("--max-channels 16"));
    // NCCL's default spelled out by the user is the same candidate as the
    // default space's: one row.
    let spelled = rows
        .iter()
        .filter(|r| r.setting.to_string() == "NCCL_BUFFSIZE=4194304")
        .count();
    assert_eq!(spelled, 1);
    let socks = rows
        .iter()
        .filter(|r| r.knob == Knob::SocketThreads)
        .count();
    assert_eq!(socks, SOCKET_PAIRS.len());
    assert!(rows
        .iter()
        .filter(|r| r.in_child)
        .all(|r| !r.setting.env.is_empty()));
}

#[test]
fn hosts_are_distinct_identities() {
    assert_eq!(distinct_hosts(["emu0", "emu1", "emu0"]), 2);
    assert_eq!(distinct_hosts([]), 1);
}

#[test]
fn env_candidates_left_out_are_listed_as_not_measured() {
    let mut plan = Plan::new(job(2, Transport::Socket), &[]);
    plan.env_not_measured = Some("several processes".into());
    assert!(plan.search_space().extra.is_empty());
    let rows = plan.rows(&[Collective::AllReduce], None);
    let env: Vec<_> = rows.iter().filter(|r| r.in_child).collect();
    assert!(!env.is_empty());
    assert!(env
        .iter()
        .all(|r| !r.measured && r.why == "not measured: several processes"));
    assert!(rows.iter().filter(|r| !r.in_child).all(|r| r.measured));
}
