//! Timing rows (and their worker protocol), number formatting and the result tables.

use crate::measure::sizes;
use crate::opts::Opts;
use std::io::Write;

/// One timing: method, direction ("to" or "from"), size, best nanoseconds per call.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) method: String,
    pub(crate) dir: &'static str,
    pub(crate) size: usize,
    pub(crate) ns: f64,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.size as f64 / self.ns
    }
    pub(crate) fn tsv(&self) -> String {
        format!(
            "{}\t{}\t{}\t{:.1}\t{:.4}",
            self.method,
            self.dir,
            self.size,
            self.ns,
            self.gbps()
        )
    }
    pub(crate) fn from_tsv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            return None;
        }
        let dir = match f[1] {
            "to" => "to",
            "from" => "from",
            _ => return None,
        };
        Some(Row {
            method: f[0].to_owned(),
            dir,
            size: f[2].parse().ok()?,
            ns: f[3].parse().ok()?,
        })
    }
}

pub(crate) fn say(s: &str) {
    println!("{s}");
    let _ = std::io::stdout().flush();
}

fn fmt_gbps(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(g) if g >= 10.0 => format!("{g:.1}"),
        Some(g) if g >= 0.1 => format!("{g:.2}"),
        Some(g) => format!("{g:.4}"),
    }
}

fn human(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

pub(crate) fn table(rows: &[Row], o: &Opts) {
    let mut methods: Vec<String> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method) {
            methods.push(r.method.clone());
        }
    }
    let get = |m: &str, dir: &str, n: usize| {
        rows.iter()
            .find(|r| r.method == m && r.dir == dir && r.size == n)
            .map(|r| r.gbps())
    };
    let ours: Vec<&String> = methods.iter().filter(|m| m.starts_with("ours")).collect();
    let memory = if o.host_wc {
        "CUDA write-combined host memory"
    } else {
        "the BAR"
    };
    for dir in ["to", "from"] {
        say(&format!(
            "\n### {} {memory} (GB/s, best of {}; each call fenced)\n",
            if dir == "to" { "Host to" } else { "From" },
            o.reps
        ));
        // Ratio columns: each engine column over each upstream baseline present in this direction.
        let baselines: Vec<&str> = ["upstream", "upstream+lfence"]
            .into_iter()
            .filter(|b| rows.iter().any(|r| r.method == *b && r.dir == dir))
            .collect();
        let mut head = String::from("| size |");
        for m in &methods {
            head += &format!(" {m} |");
        }
        for b in &baselines {
            for m in &ours {
                head += &format!(" {m}/{b} |");
            }
        }
        say(&head);
        say(&format!(
            "|{}",
            "---|".repeat(head.matches('|').count() - 1)
        ));
        for n in sizes(o.max) {
            let mut line = format!("| {} |", human(n));
            for m in &methods {
                line += &format!(" {} |", fmt_gbps(get(m, dir, n)));
            }
            for b in &baselines {
                for m in &ours {
                    let ratio = match (get(m, dir, n), get(b, dir, n)) {
                        (Some(a), Some(b)) => format!("{:.2}", a / b),
                        _ => "-".into(),
                    };
                    line += &format!(" {ratio} |");
                }
            }
            say(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_survive_the_worker_protocol() {
        let r = Row {
            method: "ours:avx2".into(),
            dir: "from",
            size: 4096,
            ns: 1234.5,
        };
        let back = Row::from_tsv(&r.tsv()).unwrap();
        assert_eq!(
            (back.method.as_str(), back.dir, back.size),
            ("ours:avx2", "from", 4096)
        );
        assert!((back.ns - 1234.5).abs() < 0.01);
        assert!(Row::from_tsv("x\tsideways\t1\t2").is_none());
        assert!(Row::from_tsv("garbage").is_none());
        assert_eq!(sizes(16), vec![1, 2, 4, 8, 16]);
        assert_eq!(human(3 << 20), "3M");
        assert_eq!(human(2048), "2K");
    }
}
