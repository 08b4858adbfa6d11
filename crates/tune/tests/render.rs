//! The writers, as snapshots of one seeded search on the fake machine.

use collbench_core::Collective;
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::tuner_csv::TunerConfig;
use collbench_tune::{render, tune, Registration, Setting, TuneConfig, TuneReport};
use std::sync::atomic::AtomicBool;

/// Small sizes gain from symmetric windows, large ones from 64 channels
/// (as on the H200 pair), 4 MiB from nothing.
fn report() -> TuneReport {
    let truth: Truth = Box::new(|s: &Setting, c| {
        let base = 12.0 + c.bytes as f64 / 250e3;
        let f = match (c.bytes, s) {
            (_, s) if s.is_default() => 1.0,
            (b, s) if b >= 64 << 20 && s.channels == Some(64) => 0.77,
            (b, s) if b >= 64 << 20 && s.channels == Some(32) => 0.9,
            (b, s) if b <= 64 << 10 && s.registration == Registration::Symmetric => 0.85,
            _ => 1.2,
        };
        Some(base * f)
    });
    let mut m = FakeMeasurer::new(42, truth);
    let mut cfg = TuneConfig::new(
        vec![Collective::AllReduce, Collective::AllGather],
        vec![8, 64 << 10, 4 << 20, 512 << 20],
        2,
        1,
        120e6,
    );
    cfg.max_channels = Some(64);
    tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {})
}

#[test]
fn text_table() {
    insta::assert_snapshot!(render::text(&report()));
}

#[test]
fn markdown_table() {
    insta::assert_snapshot!(render::markdown(&report()));
}

#[test]
fn shell_lines() {
    insta::assert_snapshot!(render::shell(&report()));
}

#[test]
fn tuner_csv_file() {
    let (cfg, notes) = TunerConfig::from_report(&report());
    insta::assert_snapshot!(cfg.to_csv(&notes));
}

#[test]
fn json_round_trips() {
    let r = report();
    let back: TuneReport = serde_json::from_str(&render::json(&r)).unwrap();
    // Floats may come back one unit in the last place off (serde_json
    // without float_roundtrip); everything else exactly.
    assert_eq!(back.bands.len(), r.bands.len());
    assert_eq!(back.end, r.end);
    for (a, b) in back.bands.iter().zip(&r.bands) {
        assert_eq!(a.band, b.band);
        assert_eq!(a.candidates.len(), b.candidates.len());
        assert_eq!(a.gain().map(|g| g.0), b.gain().map(|g| g.0));
        if let (Some((_, x)), Some((_, y))) = (a.gain(), b.gain()) {
            assert!((x.estimate - y.estimate).abs() < 1e-12);
        }
    }
}

#[test]
fn env_values_a_shell_would_split_are_quoted() {
    let s = Setting {
        env: vec![
            ("NCCL_NET".into(), "AWS Libfabric".into()),
            ("NCCL_SOCKET_IFNAME".into(), "=eth0".into()),
            ("X".into(), "it's".into()),
        ],
        ..Setting::default()
    };
    assert_eq!(
        render::env_lines(&s),
        [
            "export NCCL_NET='AWS Libfabric'",
            "export NCCL_SOCKET_IFNAME==eth0",
            "export X='it'\\''s'",
        ]
    );
}

#[test]
fn env_lines_per_knob() {
    let s = Setting {
        channels: Some(64),
        registration: Registration::Symmetric,
        ..Setting::default()
    };
    assert_eq!(
        render::env_lines(&s),
        vec![
            "export NCCL_MIN_NCHANNELS=64".to_string(),
            "export NCCL_MAX_NCHANNELS=64".to_string(),
            "# needs symmetric windows (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC; nccl-tests -R 2)".to_string(),
        ]
    );
}

/// An environment that wins most bands is the one the shell lines set;
/// where another setting won, its own figure on fresh pairs is said, and the
/// hint says NCCL reads the variables once per process (no tuner config
/// can set them per band).
#[test]
fn an_environment_winner_says_what_it_measured_where_it_lost() {
    let env = |n: &str| Setting {
        env: vec![
            ("NCCL_NSOCKS_PERTHREAD".into(), n.into()),
            ("NCCL_SOCKET_NTHREADS".into(), "1".into()),
        ],
        ..Setting::default()
    };
    let (four, two) = (env("4"), env("2"));
    let (t_four, t_two) = (four.clone(), two.clone());
    let truth: Truth = Box::new(move |s: &Setting, c| {
        let large = c.bytes >= 256 << 20;
        let f = if *s == t_four {
            if large {
                0.7
            } else {
                0.5
            }
        } else if *s == t_two {
            if large {
                0.45
            } else {
                0.8
            }
        } else {
            1.0
        };
        Some((20.0 + c.bytes as f64 / 1e3) * f)
    });
    let mut m = FakeMeasurer::new(7, truth);
    let mut cfg = TuneConfig::new(
        vec![Collective::AllReduce],
        vec![1 << 20, 8 << 20, 64 << 20, 512 << 20],
        2,
        2,
        120e6,
    );
    cfg.space = collbench_tune::CandidateSpace::only(vec![four.clone(), two.clone()]);
    let r = tune(&mut m, &cfg, &AtomicBool::new(false), &mut |_| {});
    let shell = render::shell(&r);
    let lines: Vec<&str> = shell.lines().collect();
    assert!(
        lines[0].contains("NCCL_NSOCKS_PERTHREAD=4") && lines[0].contains("3 of 4 bands"),
        "{shell}"
    );
    // Its figure where NSOCKS=2 won: about +43% (time 0.7 of the
    // default), from the process-wide phase's fresh pairs.
    let elsewhere = lines[1];
    assert!(
        elsewhere.starts_with("# where it did not win, it measured (fresh pairs"),
        "{shell}"
    );
    let pct: f64 = elsewhere
        .split("all_reduce 512M ")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no 512M figure in {elsewhere}"));
    assert!((35.0..52.0).contains(&pct), "{elsewhere}");
    let pw = r.process_wide.as_ref().expect("a process-wide phase");
    assert_eq!(pw.setting, four);
    assert_eq!(pw.bands.len(), 1, "{pw:?}");
    assert_eq!(pw.bands[0].band.probe_bytes, 512 << 20);
    assert!(lines[2].contains("once per process"), "{shell}");
    assert!(
        shell.contains("export NCCL_NSOCKS_PERTHREAD=4\n"),
        "{shell}"
    );
    assert!(
        shell.contains("# instead, NCCL_NSOCKS_PERTHREAD=2, NCCL_SOCKET_NTHREADS=1 won 1 of 4 bands: all_reduce 512M +"),
        "{shell}"
    );
    assert!(!shell.contains("more than the band's winner"), "{shell}");
    // Had the band's own pick confirmed at less than the process-wide
    // setting's fresh figure (0.8 of the default's time against 0.7), the
    // line says the band's pick was not the best there.
    let mut worse = r.clone();
    let band = worse
        .bands
        .iter_mut()
        .find(|b| b.band.probe_bytes == 512 << 20)
        .expect("the 512M band");
    let collbench_tune::Outcome::Gain { ratio, .. } = &mut band.outcome else {
        panic!("512M has a winner: {:?}", band.outcome);
    };
    *ratio = collbench_tune::Interval {
        estimate: 0.8,
        lo: 0.78,
        hi: 0.82,
        ..*ratio
    };
    let shell = render::shell(&worse);
    assert!(
        shell.contains("all_reduce 512M +") && shell.contains("(more than the band's winner)"),
        "{shell}"
    );
}
