//! Reports built from real logs: Markdown tables, self-contained HTML, and
//! (with COLLBENCH_BROWSER_TESTS=1) the HTML opened in headless Chromium to
//! check that every chart SVG is laid out with a non-zero size.

use collbench_core::Record;
use collbench_report::parse::parse_file;
use collbench_report::render::{html, markdown};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn records(rels: &[&str]) -> Vec<Record> {
    rels.iter()
        .flat_map(|r| parse_file(&fixture(r), None).unwrap())
        .collect()
}

fn matrix() -> html::Matrix {
    let n = 4;
    html::Matrix {
        title: "4 ranks".to_string(),
        labels: (0..n).map(|i| format!("rank {i}")).collect(),
        gbps: (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            f64::NAN
                        } else {
                            300.0 + (i * n + j) as f64
                        }
                    })
                    .collect()
            })
            .collect(),
        cut: None,
    }
}

#[test]
fn markdown_has_summary_environment_and_case_tables() {
    let recs = records(&[
        "anchors/all_reduce.txt",
        "anchors/all_reduce.json",
        "foreign/nccom-test__neuron-doc-2rank-fp32-allr.txt",
    ]);
    let md = markdown::render(&recs);
    assert!(md.contains("| all_reduce | float | all_reduce.txt | 349.58 | 8 GiB | 349.58 | 8 GiB | 12.54 | 8 B | 0 |"), "{md}");
    assert!(
        md.contains(
            "| all_reduce | fp32 | nccom-test__neuron-doc-2rank-fp32-allr.txt | 52.83 | 1 GiB |"
        ),
        "{md}"
    );
    assert!(md.contains("| all_reduce.txt | nccl-tests 2.19.6 | NCCL 2.28.3 | 2 | vm | 2 x NVIDIA H200 | 112.22 |"), "{md}");
    assert!(md.contains("| 8 GiB | 2147483648 | float | sum | -1 | 24571.90 | 349.58 | 349.58 | 0 | 24990.20 | 343.73 | 343.73 | 0 |"), "{md}");
    assert!(md.contains("nccom-test: time is the P50"), "{md}");
    // GitHub needs the delimiter row right after each header.
    for (i, line) in md.lines().enumerate() {
        if line.starts_with("| size |") {
            assert!(md.lines().nth(i + 1).unwrap().starts_with("| ---: |"));
        }
    }
}

#[test]
fn html_is_self_contained_with_charts() {
    let recs = records(&[
        "anchors/all_reduce.txt",
        "anchors/mpi2_all_reduce_periter.txt",
        "foreign/osu_latency__ai-fabric-lab-v7.4.txt",
    ]);
    let page = html::render(&recs, &[matrix()]);
    assert!(!page.contains("<script"));
    assert!(!page.contains("src="));
    assert!(!page.contains("<link"));
    // Two charts per op (busbw, time) plus the heatmap.
    assert_eq!(
        page.matches("<figure class=\"chart\"><svg").count(),
        2 * 2 + 1
    );
    assert!(page.contains("all_reduce: bus bandwidth") && page.contains("osu_latency: time"));
    assert!(
        page.contains("all_reduce.txt") && page.contains("mpi2_all_reduce_periter.txt"),
        "legend labels"
    );
    assert!(page.contains("rank 3") && page.contains("<h2>Bandwidth matrix</h2>"));
}

/// Finds Chromium the way Debian and Ubuntu install it.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs headless Chromium on `page` with a probe script appended that
/// writes each chart's laid-out size into the DOM; returns (width, height)
/// per chart SVG. The report itself carries no script: the probe is added
/// to a copy here.
fn rendered_svg_sizes(browser: &Path, page: &str) -> Vec<(f64, f64)> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    let probe = "<script>document.addEventListener('DOMContentLoaded',function(){var out=[];\
        document.querySelectorAll('figure.chart svg').forEach(function(s){var r=s.getBoundingClientRect();out.push(r.width+'x'+r.height);});\
        var p=document.createElement('pre');p.id='svg-sizes';p.textContent=out.join(' ');document.body.appendChild(p);});</script>";
    std::fs::write(&file, page.replace("</body>", &format!("{probe}</body>"))).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
        ])
        .args([
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"svg-sizes\">").unwrap_or_else(|| {
        panic!(
            "probe output missing; chromium stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let text = &dom[start + "<pre id=\"svg-sizes\">".len()..];
    let text = &text[..text.find("</pre>").unwrap()];
    text.split_whitespace()
        .map(|wh| {
            let (w, h) = wh.split_once('x').unwrap();
            (w.parse().unwrap(), h.parse().unwrap())
        })
        .collect()
}

#[test]
fn html_charts_render_in_headless_chromium() {
    if std::env::var("COLLBENCH_BROWSER_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set COLLBENCH_BROWSER_TESTS=1 (and install chromium) to run");
        return;
    }
    let browser = chromium()
        .expect("COLLBENCH_BROWSER_TESTS=1 but no chromium on PATH (apt-get install chromium)");
    let recs = records(&[
        "anchors/all_reduce.txt",
        "anchors/all_reduce.json",
        "foreign/nccl-tests__ztan-a3mega-h100-2node.txt",
        "foreign/nvshmem-perftest__cscs-alps-gh200-alltoall_latency.txt",
    ]);
    let page = html::render(&recs, &[matrix()]);
    let expected = page.matches("<figure class=\"chart\"><svg").count();
    let sizes = rendered_svg_sizes(&browser, &page);
    assert_eq!(sizes.len(), expected, "{sizes:?}");
    for (w, h) in &sizes {
        assert!(
            *w > 100.0 && *h > 100.0,
            "a chart rendered at {w}x{h}: {sizes:?}"
        );
    }
    if let Ok(dir) = std::env::var("COLLBENCH_REPORT_KEEP") {
        std::fs::write(Path::new(&dir).join("report.html"), &page).unwrap();
    }
}

/// The `compare --html` page, opened in headless Chromium: both charts of
/// each op are laid out, and a screenshot of the page is not blank.
#[test]
fn compare_html_renders_in_headless_chromium() {
    if std::env::var("COLLBENCH_BROWSER_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set COLLBENCH_BROWSER_TESTS=1 (and install chromium) to run");
        return;
    }
    let browser = chromium()
        .expect("COLLBENCH_BROWSER_TESTS=1 but no chromium on PATH (apt-get install chromium)");
    let base = records(&["anchors/all_reduce.txt"]);
    let mut new = base.clone();
    // NEW 20% slower from 64 MiB up: a regression over adjacent sizes.
    for c in new.iter_mut().flat_map(|r| r.results.iter_mut()) {
        if c.size_bytes >= 64 << 20 {
            for p in [c.out_of_place.as_mut(), c.in_place.as_mut()]
                .into_iter()
                .flatten()
            {
                p.busbw_gbps *= 0.8;
                p.algbw_gbps *= 0.8;
                p.time_us /= 0.8;
            }
        }
    }
    let cmp = collbench_report::compare::compare(&base, &new, 5.0);
    assert!(cmp.regressions().next().is_some(), "{}", cmp.table());
    let (bs, ns) = (
        collbench_report::compare_sides::side(&base),
        collbench_report::compare_sides::side(&new),
    );
    let sides = collbench_report::compare_out::Sides {
        base_name: "base.txt",
        new_name: "new.txt",
        base: &bs,
        new: &ns,
    };
    let page = collbench_report::render::compare_html::render(&sides, &cmp);
    let sizes = rendered_svg_sizes(&browser, &page);
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(
        sizes.iter().all(|(w, h)| *w > 100.0 && *h > 100.0),
        "{sizes:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (file, png) = (dir.path().join("cmp.html"), dir.path().join("cmp.png"));
    std::fs::write(&file, &page).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let status = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args(["--hide-scrollbars", "--window-size=1280,1600"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("run chromium");
    let bytes = std::fs::read(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}); chromium stderr: {}",
            String::from_utf8_lossy(&status.stderr)
        )
    });
    // A PNG, and more than a blank page compresses to.
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    assert!(bytes.len() > 20_000, "screenshot of {} bytes", bytes.len());
    if let Ok(dir) = std::env::var("COLLBENCH_REPORT_KEEP") {
        std::fs::write(Path::new(&dir).join("compare.html"), &page).unwrap();
    }
}
