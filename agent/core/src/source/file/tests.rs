//! The file source's state machine on plain values and a fake clock: every action is
//! answered by hand, as the executor would after looking at the filesystem.

use std::collections::HashMap;

use super::watch::Mask;
use super::*;

const DIR: &str = "/etc/outpost/manifests";
const PARENT: &str = "/etc/outpost";
/// The watch ids the harness's executor hands out.
const DIR_WATCH: u64 = 1;
const PARENT_WATCH: u64 = 2;

fn id(n: u64) -> WatchId {
    WatchId::new(n)
}

fn pod(name: &str, image: &str) -> Content {
    Content::Bytes(
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n"
        )
        .into_bytes(),
    )
}

/// A pod whose manifest decodes with a warning (its priority class is not known).
fn warned(name: &str) -> Content {
    Content::Bytes(
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  priorityClassName: gold\n  containers:\n  - name: main\n    image: i\n"
        )
        .into_bytes(),
    )
}

fn text(s: &str) -> Content {
    Content::Bytes(s.as_bytes().to_vec())
}

/// A mask from flags written as the kernel table in `watch.rs` writes them.
fn mask(flags: &str) -> Mask {
    let mut mask = Mask::default();
    for flag in flags.split('|') {
        let bit = match flag {
            "create" => &mut mask.create,
            "modify" => &mut mask.modify,
            "close_write" => &mut mask.close_write,
            "attrib" => &mut mask.attrib,
            "delete" => &mut mask.delete,
            "moved_from" => &mut mask.moved_from,
            "moved_to" => &mut mask.moved_to,
            "self_deleted" => &mut mask.self_deleted,
            "self_moved" => &mut mask.self_moved,
            "is_dir" => &mut mask.is_dir,
            other => panic!("unknown flag {other}"),
        };
        *bit = true;
    }
    mask
}

/// An event about `name` in the watched directory `dir`, written by PID 42.
fn entry(dir: u64, name: &str, flags: &str) -> Event {
    Event::Entry { dir: id(dir), name: Some(name.into()), mask: mask(flags), pid: Some(42) }
}

/// An event about the watched directory `dir` itself.
fn itself(dir: u64, flags: &str) -> Event {
    Event::Entry { dir: id(dir), name: None, mask: mask(flags), pid: None }
}

/// A machine, a fake clock (milliseconds since the start) and the last actions.
struct Harness {
    machine: Machine,
    start: Instant,
    ms: u64,
    last: Vec<Action>,
    wake: Option<Instant>,
    /// The files the last [`Harness::answer`] read, in order.
    read: Vec<String>,
    /// Every change recorded so far.
    changes: Vec<Change>,
    /// Every warning reported so far: the file's name and its first warning.
    warned: Vec<(String, String)>,
    /// Every list of manifests with problems reported so far.
    problems: Vec<Vec<ManifestProblem>>,
}

impl Harness {
    fn new(target: Target) -> Harness {
        Harness {
            machine: Machine::new(DIR.into(), target, "node-a".into()),
            start: Instant::now(),
            ms: 0,
            last: Vec::new(),
            wake: None,
            read: Vec::new(),
            changes: Vec::new(),
            warned: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn dir() -> Harness {
        Harness::new(Target::Dir(DIR.into()))
    }

    /// A directory source that has sent its first SET, read from `files`.
    fn with(files: &[(&str, Content)]) -> Harness {
        let mut h = Harness::dir();
        h.start_watched();
        let names = files.iter().map(|(name, _)| OsString::from(name)).collect();
        let mut actions = h.step(Input::Listed(Listing::Names(names)));
        if !files.is_empty() {
            actions = h.answer(files, &[]);
        }
        assert!(actions.last().is_some_and(|a| a.starts_with("set")), "{actions:?}");
        h
    }

    /// Starts with both watches made; the scan's listing is next.
    fn start_watched(&mut self) {
        assert_eq!(self.step(Input::Start), [format!("arm dir={DIR} parent={PARENT}")]);
        let armed = Input::Armed { dir: Some(id(DIR_WATCH)), parent: Some(id(PARENT_WATCH)) };
        assert_eq!(self.step(armed), [format!("list {DIR}")]);
    }

    fn now(&self) -> Now {
        Now { at: self.start + Duration::from_millis(self.ms), wall: Timestamp::UNIX_EPOCH }
    }

    fn at(&mut self, ms: u64) -> &mut Harness {
        self.ms = ms;
        self
    }

    /// Steps, and describes what the machine asks for.
    fn step(&mut self, input: Input) -> Vec<String> {
        let step = self.machine.step(input, self.now());
        self.wake = step.wake;
        self.last = step.actions;
        for action in &self.last {
            match action {
                Action::Record(change) => self.changes.push(change.clone()),
                Action::Warn { path, warnings } => {
                    let name = path.file_name().unwrap_or_default().to_string_lossy();
                    let first = warnings.first().cloned().unwrap_or_default();
                    self.warned.push((name.into_owned(), first));
                }
                Action::Problems(problems) => self.problems.push(problems.clone()),
                _ => {}
            }
        }
        // Warnings and problems are followed on their own (`warned`, `problems`).
        let reported = |a: &&Action| matches!(a, Action::Warn { .. } | Action::Problems(_));
        self.last.iter().filter(|a| !reported(a)).map(describe).collect()
    }

    /// The manifests with problems as last reported: `severity file: first problem`.
    fn problems(&self) -> Vec<String> {
        let last = self.problems.last().map(Vec::as_slice).unwrap_or_default();
        last.iter()
            .map(|p| {
                let file = p.manifest.strip_prefix(&format!("{DIR}/")).unwrap_or(&p.manifest);
                format!("{} {file}: {p}", p.severity)
            })
            .collect()
    }

    fn events(&mut self, events: Vec<Event>) -> Vec<String> {
        self.step(Input::Events(events))
    }

    fn tick(&mut self, ms: u64) -> Vec<String> {
        self.at(ms).step(Input::Tick)
    }

    /// Answers the last [`Action::Read`] or [`Action::Look`], and the ones that follow,
    /// until the machine asks for neither: each file read gets its content in `files` (a
    /// missing name is `Missing`), each entry looked at is a symlink or directory if
    /// listed in `links_or_dirs`. Returns what the machine asked for on the way, reads and
    /// looks aside (the files read are in `read`).
    fn answer(&mut self, files: &[(&str, Content)], links_or_dirs: &[&str]) -> Vec<String> {
        self.answer_linked(files, &HashMap::new(), links_or_dirs)
    }

    /// [`Harness::answer`], with the files in `links` being symlinks to those paths.
    fn answer_linked(
        &mut self,
        files: &[(&str, Content)],
        links: &HashMap<&str, &str>,
        links_or_dirs: &[&str],
    ) -> Vec<String> {
        self.read.clear();
        let mut answered = 0;
        let mut asked = Vec::new();
        loop {
            let input = match self
                .last
                .iter()
                .find(|a| matches!(a, Action::Read { .. } | Action::Look { .. }))
            {
                Some(Action::Read { name, cause, .. }) => {
                    let key = name.to_string_lossy().into_owned();
                    let content = files
                        .iter()
                        .find(|(n, _)| *n == key)
                        .map_or(Content::Missing, |(_, c)| c.clone());
                    let link = links.get(key.as_str()).map(PathBuf::from);
                    let found = Found { name: name.clone(), cause: *cause, content, link };
                    self.read.push(key);
                    Input::Read(found)
                }
                Some(Action::Look { names, .. }) => Input::Looked(
                    names
                        .iter()
                        .map(|name| {
                            (name.clone(), links_or_dirs.iter().any(|n| OsStr::new(n) == name))
                        })
                        .collect(),
                ),
                _ => break,
            };
            answered += 1;
            let described = self.step(input);
            asked.extend(
                described
                    .into_iter()
                    .filter(|d| !d.starts_with("read ") && !d.starts_with("look ")),
            );
        }
        assert!(answered > 0, "no read or look asked for: {:?}", self.last);
        asked
    }

    fn wake_ms(&self) -> Option<u64> {
        self.wake.map(|at| at.duration_since(self.start).as_millis() as u64)
    }

    /// The last SET asked for.
    fn set(&self) -> &SourceUpdate {
        self.last
            .iter()
            .find_map(|a| match a {
                Action::Send(update) => Some(update),
                _ => None,
            })
            .expect("a SET")
    }

    /// The last change recorded about `name`.
    fn change(&self, name: &str) -> &Change {
        self.changes.iter().rev().find(|change| change.name == name).expect("a change")
    }
}

/// One action in words, to compare whole steps at a glance.
fn describe(action: &Action) -> String {
    let path = |p: &Option<PathBuf>| p.as_ref().map_or("-".into(), |p| p.display().to_string());
    match action {
        Action::Locate(p) => format!("locate {}", p.display()),
        Action::Arm { dir, parent } => format!("arm dir={} parent={}", path(dir), path(parent)),
        Action::Unwatch(id, scope) => format!("unwatch {id} {scope:?}"),
        Action::List(p) => format!("list {}", p.display()),
        Action::Read { name, .. } => format!("read {}", name.to_string_lossy()),
        Action::Look { names, .. } => {
            let names: Vec<_> = names.iter().map(|n| n.to_string_lossy()).collect();
            format!("look {}", names.join(" "))
        }
        Action::WatchLinks { drop, add } => {
            let drop: Vec<String> = drop.iter().map(|id| format!("-{id}")).collect();
            let add: Vec<String> = add
                .iter()
                .flat_map(|(dir, links)| {
                    links.iter().map(move |l| {
                        format!(
                            "+{}/{}>{}",
                            dir.display(),
                            l.target.to_string_lossy(),
                            l.manifest.to_string_lossy()
                        )
                    })
                })
                .collect();
            format!("links {}", [drop, add].concat().join(" "))
        }
        Action::Record(c) => {
            let cause = match c.cause {
                Cause::Event { pid: Some(pid) } => format!("pid {pid}"),
                Cause::Event { pid: None } => "event".into(),
                Cause::Rescan => "rescan".into(),
            };
            format!("{} {} ({cause})", c.kind, c.name.to_string_lossy())
        }
        Action::Warn { path, .. } => format!("warn {}", path.display()),
        Action::Problems(problems) => format!("problems {}", problems.len()),
        Action::Send(update) => {
            let pods: Vec<&str> =
                update.pods.iter().map(|p| p.pod.metadata.name.as_deref().unwrap_or("?")).collect();
            format!("set [{}]", pods.join(" "))
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// Start, scan, S10, S11.

#[test]
fn s10_start_watches_then_reads_every_manifest_and_sends_the_first_set() {
    let mut h = Harness::dir();
    h.start_watched();
    let listing = ["b.yml", "a.yaml", ".hidden.yaml", "notes.txt", "c.json", "d"];
    let actions = h.step(Input::Listed(Listing::Names(listing.map(OsString::from).to_vec())));
    assert_eq!(actions, ["read a.yaml"]);
    let actions =
        h.answer(&[("a.yaml", pod("a", "i")), ("b.yml", pod("b", "i")), ("d", pod("d", "i"))], &[]);
    assert_eq!(
        h.read,
        ["a.yaml", "b.yml", "c.json", "d"],
        "one at a time; dotfiles and other extensions skipped"
    );
    assert_eq!(
        actions,
        strings(&[
            "added a.yaml (rescan)",
            "added b.yml (rescan)",
            "added d (rescan)",
            "set [a-node-a b-node-a d-node-a]",
        ]),
        "c.json vanished between the listing and the read: nothing to forget"
    );
    assert_eq!(h.set().op, Op::Set);
    assert_eq!(h.wake, None, "nothing to wait for but events");
}

#[test]
fn s11_a_missing_directory_is_an_empty_set_then_its_creation_is_seen() {
    let mut h = Harness::dir();
    h.step(Input::Start);
    let armed = Input::Armed { dir: None, parent: Some(id(PARENT_WATCH)) };
    assert_eq!(h.step(armed), [format!("list {DIR}")], "scanned at start whatever the watch");
    assert_eq!(h.step(Input::Listed(Listing::Missing)), ["set []"], "S11: an empty SET");
    assert_eq!(h.wake, None, "the parent's watch will tell");
    // mkdir in the parent: found again, watched, scanned.
    let actions = h.events(vec![entry(PARENT_WATCH, "manifests", "create|is_dir")]);
    assert_eq!(actions, [format!("locate {DIR}")]);
    let actions = h.step(Input::Located(Target::Dir(DIR.into())));
    assert_eq!(actions, [format!("arm dir={DIR} parent=-")], "the parent is still watched");
    assert_eq!(h.step(Input::Armed { dir: Some(id(7)), parent: None }), [format!("list {DIR}")]);
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    assert_eq!(h.answer(&[("web.yaml", pod("web", "i"))], &[]).last().unwrap(), "set [web-node-a]");
    // The new watch is the directory's.
    assert_eq!(h.events(vec![entry(7, "web.yaml", "delete")]), ["read web.yaml"]);
}

#[test]
fn a_directory_that_cannot_be_listed_is_empty() {
    let mut h = Harness::dir();
    h.start_watched();
    assert_eq!(h.step(Input::Listed(Listing::Failed("Permission denied".into()))), ["set []"]);
}

#[test]
fn unwatchable_directory_and_parent_are_retried_with_a_doubling_backoff() {
    let mut h = Harness::dir();
    h.step(Input::Start);
    assert_eq!(h.step(Input::Armed { dir: None, parent: None }), [format!("list {DIR}")]);
    assert_eq!(h.step(Input::Listed(Listing::Missing)), ["set []"]);
    assert_eq!(h.wake_ms(), Some(250));
    assert!(h.tick(100).is_empty(), "not due yet");
    assert_eq!(h.wake_ms(), Some(250));
    let mut at = 250;
    for delay in [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000] {
        assert_eq!(h.tick(at), [format!("arm dir={DIR} parent={PARENT}")]);
        assert_eq!(h.wake, None, "busy: the result comes first");
        assert!(h.step(Input::Armed { dir: None, parent: None }).is_empty(), "no scan, no SET");
        at += delay;
        assert_eq!(h.wake_ms(), Some(at), "up to REWATCH_MAX");
    }
    // The directory can be watched at last: it is scanned, and its content sent.
    h.tick(at);
    let armed = Input::Armed { dir: Some(id(9)), parent: Some(id(10)) };
    assert_eq!(h.step(armed), [format!("list {DIR}")]);
    h.step(Input::Listed(Listing::Names(vec!["a.yaml".into()])));
    assert_eq!(h.answer(&[("a.yaml", pod("a", "i"))], &[]).last().unwrap(), "set [a-node-a]");
    assert_eq!(h.wake, None);
}

#[test]
fn a_retry_that_watches_only_the_parent_stops_retrying_without_a_scan() {
    let mut h = Harness::dir();
    h.step(Input::Start);
    h.step(Input::Armed { dir: None, parent: None });
    h.step(Input::Listed(Listing::Missing));
    h.tick(250);
    assert!(h.step(Input::Armed { dir: None, parent: Some(id(3)) }).is_empty());
    assert_eq!(h.wake, None, "the parent's watch will tell");
    assert_eq!(h.events(vec![entry(3, "manifests", "create|is_dir")]), [format!("locate {DIR}")]);
}

// One event, one file looked at.

#[test]
fn a_closed_write_is_read_at_once_and_changes_the_set() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    let before = h.set().pods[0].uid().to_owned();
    assert_eq!(
        h.events(vec![entry(DIR_WATCH, "web.yaml", "modify|close_write")]),
        ["read web.yaml"]
    );
    let actions = h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"]);
    assert_ne!(h.set().pods[0].uid(), before, "M10: an edit is a new UID");
    let change = h.change("web.yaml");
    assert_eq!(change.path, Path::new(DIR).join("web.yaml"));
    assert!(change.sha256.as_deref().is_some_and(|s| s.starts_with("sha256:")));
    assert_eq!(change.pods.len(), 1);
}

#[test]
fn unchanged_rewrites_touch_and_chmod_send_nothing() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    assert_eq!(h.events(vec![entry(DIR_WATCH, "web.yaml", "attrib")]), ["read web.yaml"]);
    assert!(h.answer(&[("web.yaml", pod("web", "i"))], &[]).is_empty());
    assert_eq!(
        h.events(vec![entry(DIR_WATCH, "web.yaml", "attrib|close_write")]),
        ["read web.yaml"]
    );
    assert!(h.answer(&[("web.yaml", pod("web", "i"))], &[]).is_empty());
}

#[test]
fn a_file_still_being_written_is_read_once_quiet() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    assert!(h.events(vec![entry(DIR_WATCH, "web.yaml", "modify")]).is_empty());
    assert_eq!(h.wake_ms(), Some(250));
    h.at(200);
    assert!(h.events(vec![entry(DIR_WATCH, "web.yaml", "modify")]).is_empty());
    assert_eq!(h.wake_ms(), Some(450), "each write restarts the quiet period");
    assert!(h.tick(300).is_empty());
    assert_eq!(h.tick(450), ["read web.yaml"]);
    assert_eq!(h.answer(&[("web.yaml", pod("web", "img:2"))], &[]).len(), 2);
    assert_eq!(h.wake, None, "nothing left to read");
}

#[test]
fn a_close_after_writes_reads_at_once_and_cancels_the_quiet_wait() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    h.events(vec![entry(DIR_WATCH, "web.yaml", "modify")]);
    assert_eq!(h.wake_ms(), Some(250));
    h.at(50);
    assert_eq!(h.events(vec![entry(DIR_WATCH, "web.yaml", "close_write")]), ["read web.yaml"]);
    h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(h.wake, None);
    assert!(h.tick(300).is_empty());
}

#[test]
fn inotify_create_modify_close_in_one_batch_is_one_read() {
    let mut h = Harness::with(&[]);
    let batch = vec![
        entry(DIR_WATCH, "web.yaml", "create"),
        entry(DIR_WATCH, "web.yaml", "modify"),
        entry(DIR_WATCH, "web.yaml", "close_write"),
    ];
    assert_eq!(h.events(batch), ["read web.yaml"]);
    let actions = h.answer(&[("web.yaml", pod("web", "i"))], &[]);
    assert_eq!(actions, ["added web.yaml (pid 42)", "set [web-node-a]"]);
    assert_eq!(h.wake, None, "the close came after the write");
}

#[test]
fn two_writers_in_one_batch_are_one_read_for_the_later_writer() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    let by = |pid, flags| Event::Entry {
        dir: id(DIR_WATCH),
        name: Some("web.yaml".into()),
        mask: mask(flags),
        pid: Some(pid),
    };
    // 7 rewrote the same bytes, then 8 wrote new ones before the batch was read.
    let batch = vec![by(7, "modify|close_write"), by(8, "modify|close_write")];
    assert_eq!(h.events(batch), ["read web.yaml"]);
    let actions = h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(actions, ["changed web.yaml (pid 8)", "set [web-node-a]"]);
}

#[test]
fn truncate_then_write_keeps_the_last_good_pods_until_the_new_content_parses() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    // Truncated: empty for a while.
    h.events(vec![entry(DIR_WATCH, "web.yaml", "modify|close_write")]);
    assert!(h.answer(&[("web.yaml", text(""))], &[]).is_empty(), "no SET, nothing recorded");
    // Half written and closed: rejected, the last good pod stays.
    h.events(vec![entry(DIR_WATCH, "web.yaml", "modify|close_write")]);
    let half = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: main\n    ima";
    assert_eq!(h.answer(&[("web.yaml", text(half))], &[]), ["rejected web.yaml (pid 42)"]);
    let change = h.change("web.yaml");
    assert!(change.error.as_deref().is_some_and(|e| e.starts_with(DIR)), "{change:?}");
    assert_eq!(change.pods.len(), 1, "the last good pods, kept");
    // The whole new content.
    h.events(vec![entry(DIR_WATCH, "web.yaml", "modify|close_write")]);
    let actions = h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"]);
}

#[test]
fn editor_swap_files_and_other_names_are_not_looked_at() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    let batch = vec![
        entry(DIR_WATCH, ".web.yaml.swp", "create|modify|close_write"),
        entry(DIR_WATCH, ".web.yaml.swp", "modify"),
        entry(DIR_WATCH, "4913", "create|delete"),
        entry(DIR_WATCH, "web.yaml~", "create|close_write"),
        entry(DIR_WATCH, "notes.txt", "modify"),
        entry(DIR_WATCH, ".web.yaml.swp", "delete"),
    ];
    assert_eq!(h.events(batch), ["read 4913"], "a name with no extension is a manifest (S10)");
    assert!(h.answer(&[], &[]).is_empty(), "gone, and never known");
    assert_eq!(h.wake, None, "nothing waits to be read");
}

#[test]
fn write_temp_then_rename_reads_the_target_once() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    let batch = vec![
        entry(DIR_WATCH, ".web.yaml.tmp-1", "create|modify|close_write"),
        entry(DIR_WATCH, ".web.yaml.tmp-1", "moved_from"),
        entry(DIR_WATCH, "web.yaml", "moved_to"),
    ];
    assert_eq!(h.events(batch), ["read web.yaml"]);
    let actions = h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"]);
}

#[test]
fn fanotify_merged_delete_and_create_reads_what_is_there() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "img:1"))]);
    let merged = entry(DIR_WATCH, "web.yaml", "create|modify|close_write|delete");
    assert_eq!(h.events(vec![merged.clone()]), ["read web.yaml"]);
    let actions = h.answer(&[("web.yaml", pod("web", "img:2"))], &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"], "not a removal");
    // And the other way round: the flags say create, the file is gone.
    h.events(vec![merged]);
    assert_eq!(h.answer(&[], &[]), ["removed web.yaml (pid 42)", "set []"]);
}

#[test]
fn delete_and_rename_away_remove_the_pods() {
    let mut h = Harness::with(&[("a.yaml", pod("a", "i")), ("b.yaml", pod("b", "i"))]);
    assert_eq!(h.events(vec![entry(DIR_WATCH, "a.yaml", "delete")]), ["read a.yaml"]);
    assert_eq!(h.answer(&[], &[]), ["removed a.yaml (pid 42)", "set [b-node-a]"]);
    assert_eq!(h.change("a.yaml").pods.len(), 1, "the pods it had");
    let batch = vec![
        entry(DIR_WATCH, "b.yaml", "moved_from"),
        entry(DIR_WATCH, "b.yaml.disabled", "moved_to"),
    ];
    assert_eq!(h.events(batch), ["read b.yaml"]);
    assert_eq!(h.answer(&[], &[]), ["removed b.yaml (pid 42)", "set []"]);
}

#[test]
fn a_bad_document_among_good_ones_breaks_nothing() {
    let mut h = Harness::dir();
    h.start_watched();
    let listing = ["good.yaml", "broken.yaml", "noname.yaml", "dir.yaml", "fifo.yaml"];
    h.step(Input::Listed(Listing::Names(listing.map(OsString::from).to_vec())));
    let actions = h.answer(
        &[
            ("good.yaml", pod("good", "i")),
            ("broken.yaml", text("apiVersion: v1\nkind: Pod\nmetadata: [\n")),
            ("noname.yaml", text("apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n")),
            (
                "dir.yaml",
                Content::Unreadable("a directory; only regular files are manifests".into()),
            ),
            ("fifo.yaml", Content::Unreadable("a FIFO; only regular files are manifests".into())),
        ],
        &[],
    );
    assert_eq!(
        actions,
        strings(&[
            "rejected broken.yaml (rescan)",
            "rejected dir.yaml (rescan)",
            "rejected fifo.yaml (rescan)",
            "added good.yaml (rescan)",
            "rejected noname.yaml (rescan)",
            "set [good-node-a]",
        ])
    );
    let error = h.change("dir.yaml").error.clone().unwrap_or_default();
    assert_eq!(error, format!("{DIR}/dir.yaml: a directory; only regular files are manifests"));
    let error = h.change("noname.yaml").error.clone().unwrap_or_default();
    assert!(error.starts_with(&format!("{DIR}/noname.yaml:")), "S1 names the file: {error}");
    // Fixing a broken file brings its pod; the good one is untouched.
    h.events(vec![entry(DIR_WATCH, "broken.yaml", "close_write")]);
    let actions = h.answer(&[("broken.yaml", pod("fixed", "i"))], &[]);
    assert_eq!(actions, ["added broken.yaml (pid 42)", "set [fixed-node-a good-node-a]"]);
    // The same bad content again is not reported again.
    h.events(vec![entry(DIR_WATCH, "noname.yaml", "attrib")]);
    let noname = text("apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n");
    assert!(h.answer(&[("noname.yaml", noname)], &[]).is_empty());
}

// Manifests rejected or warned about: reported once per content, listed while they last.

#[test]
fn a_rejected_manifest_is_listed_until_it_is_fixed() {
    let broken = text("apiVersion: v1\nkind: Pod\nmetadata: [\n");
    let mut h = Harness::with(&[("good.yaml", pod("good", "i")), ("bad.yaml", broken.clone())]);
    assert_eq!(h.problems.len(), 1, "listed once the scan is done");
    let problems = h.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(&format!("rejected bad.yaml: {DIR}/bad.yaml:3:11: ")),
        "{problems:?}"
    );
    // The same bytes again change nothing: nothing reported again.
    h.events(vec![entry(DIR_WATCH, "bad.yaml", "attrib")]);
    assert!(h.answer(&[("bad.yaml", broken)], &[]).is_empty());
    assert_eq!(h.problems.len(), 1);
    // Fixed: it leaves the list.
    h.events(vec![entry(DIR_WATCH, "bad.yaml", "close_write")]);
    h.answer(&[("bad.yaml", pod("bad", "i"))], &[]);
    assert_eq!(h.problems.len(), 2);
    assert!(h.problems().is_empty());
    assert!(h.warned.is_empty(), "no warning on the way");
}

#[test]
fn a_warned_manifest_runs_is_reported_once_per_content_and_listed() {
    let mut h = Harness::with(&[("web.yaml", warned("web"))]);
    assert_eq!(h.set().pods.len(), 1, "its pods run");
    assert_eq!(h.warned.len(), 1);
    let (file, first) = &h.warned[0];
    assert_eq!(file, "web.yaml");
    assert!(first.starts_with(&format!("{DIR}/web.yaml:")), "{first}");
    assert!(first.contains("warning: spec.priorityClassName:"), "{first}");
    assert_eq!(h.problems(), [format!("warned web.yaml: {first}")]);
    // A rescan of unchanged bytes, a touch: not reported again.
    h.events(vec![Event::Overflow]);
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    h.answer(&[("web.yaml", warned("web"))], &[]);
    h.events(vec![entry(DIR_WATCH, "web.yaml", "attrib")]);
    h.answer(&[("web.yaml", warned("web"))], &[]);
    assert_eq!((h.warned.len(), h.problems.len()), (1, 1));
    // New bytes with the same pods (a comment) are decoded, so reported again.
    let Content::Bytes(bytes) = warned("web") else { unreachable!() };
    let commented = Content::Bytes([b"# edited\n".as_slice(), &bytes].concat());
    h.events(vec![entry(DIR_WATCH, "web.yaml", "close_write")]);
    assert!(h.answer(&[("web.yaml", commented)], &[]).is_empty(), "no SET: same pods");
    assert_eq!(h.warned.len(), 2);
    assert_eq!(h.problems.len(), 2, "listed again: the warning moved a line down");
    // Rewritten without the field: no longer listed.
    h.events(vec![entry(DIR_WATCH, "web.yaml", "close_write")]);
    h.answer(&[("web.yaml", pod("web", "i"))], &[]);
    assert!(h.problems().is_empty());
    assert_eq!(h.warned.len(), 2);
}

#[test]
fn a_removed_manifest_leaves_the_list() {
    let broken = text("apiVersion: v1\nkind: Pod\nmetadata: [\n");
    let mut h = Harness::with(&[("bad.yaml", broken), ("web.yaml", warned("web"))]);
    assert_eq!(h.problems().len(), 2, "{:?}", h.problems());
    h.events(vec![entry(DIR_WATCH, "bad.yaml", "delete")]);
    h.answer(&[], &[]);
    assert_eq!(h.problems().len(), 1);
    // Gone while the directory is rescanned.
    h.events(vec![Event::Overflow]);
    h.step(Input::Listed(Listing::Names(Vec::new())));
    assert!(h.problems().is_empty());
    assert_eq!(h.problems.len(), 3);
}

// Full scans: overflow, the directory replaced.

#[test]
fn overflow_rescans_and_sends_only_what_changed() {
    let mut h = Harness::with(&[("a.yaml", pod("a", "i")), ("b.yaml", pod("b", "i"))]);
    assert_eq!(h.events(vec![Event::Overflow]), [format!("list {DIR}")]);
    h.step(Input::Listed(Listing::Names(vec!["a.yaml".into(), "b.yaml".into()])));
    assert!(h.answer(&[("a.yaml", pod("a", "i")), ("b.yaml", pod("b", "i"))], &[]).is_empty());
    // Lost events: b removed, c added.
    h.events(vec![Event::Overflow]);
    let actions = h.step(Input::Listed(Listing::Names(vec!["a.yaml".into(), "c.yaml".into()])));
    assert_eq!(actions, ["removed b.yaml (rescan)", "read a.yaml"]);
    let actions = h.answer(&[("a.yaml", pod("a", "i")), ("c.yaml", pod("c", "i"))], &[]);
    assert_eq!(actions, ["added c.yaml (rescan)", "set [a-node-a c-node-a]"]);
}

#[test]
fn a_scan_in_a_batch_replaces_its_reads_and_quiet_files() {
    let mut h = Harness::with(&[("a.yaml", pod("a", "i"))]);
    h.events(vec![entry(DIR_WATCH, "b.yaml", "modify")]);
    assert_eq!(h.wake_ms(), Some(250));
    let batch = vec![entry(DIR_WATCH, "a.yaml", "close_write"), Event::Overflow];
    assert_eq!(h.events(batch), [format!("list {DIR}")]);
    assert_eq!(h.step(Input::Listed(Listing::Names(vec!["a.yaml".into()]))), ["read a.yaml"]);
    assert!(h.answer(&[("a.yaml", pod("a", "i"))], &[]).is_empty());
    assert_eq!(h.wake, None, "the scan read everything");
}

#[test]
fn directory_deleted_then_recreated() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    // `rm -r`: the file, the directory itself, its watch, its entry in the parent.
    let batch = vec![
        entry(DIR_WATCH, "web.yaml", "delete"),
        itself(DIR_WATCH, "self_deleted"),
        Event::WatchGone(id(DIR_WATCH)),
        entry(PARENT_WATCH, "manifests", "delete|is_dir"),
    ];
    let actions = h.events(batch);
    assert_eq!(actions, [format!("unwatch {} Contents", id(DIR_WATCH)), format!("locate {DIR}")]);
    let actions = h.step(Input::Located(Target::Dir(DIR.into())));
    assert_eq!(actions, [format!("arm dir={DIR} parent=-")]);
    assert_eq!(h.step(Input::Armed { dir: None, parent: None }), [format!("list {DIR}")]);
    assert_eq!(h.step(Input::Listed(Listing::Missing)), ["removed web.yaml (rescan)", "set []"]);
    assert_eq!(h.wake, None, "the parent is still watched");
    // Recreated by a rename over the name.
    let actions = h.events(vec![entry(PARENT_WATCH, "manifests", "moved_to|is_dir")]);
    assert_eq!(actions, [format!("locate {DIR}")]);
    h.step(Input::Located(Target::Dir(DIR.into())));
    h.step(Input::Armed { dir: Some(id(5)), parent: None });
    h.step(Input::Listed(Listing::Names(vec!["db.yaml".into()])));
    assert_eq!(h.answer(&[("db.yaml", pod("db", "i"))], &[]).last().unwrap(), "set [db-node-a]");
    assert_eq!(h.events(vec![entry(DIR_WATCH, "gone.yaml", "create")]), Vec::<String>::new());
    assert_eq!(h.events(vec![entry(5, "new.yaml", "create")]), ["read new.yaml"]);
}

#[test]
fn a_directory_renamed_over_the_watched_one_is_found_again() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    let batch = vec![itself(DIR_WATCH, "attrib|self_deleted"), Event::WatchGone(id(DIR_WATCH))];
    let actions = h.events(batch);
    assert_eq!(actions, [format!("unwatch {} Contents", id(DIR_WATCH)), format!("locate {DIR}")]);
}

#[test]
fn a_watch_the_kernel_removed_finds_the_directory_again() {
    // inotify on an unmounted filesystem: only WatchGone.
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    assert_eq!(h.events(vec![Event::WatchGone(id(DIR_WATCH))]), [format!("locate {DIR}")]);
    h.step(Input::Located(Target::Dir(DIR.into())));
    h.step(Input::Armed { dir: Some(id(5)), parent: None });
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    assert!(h.answer(&[("web.yaml", pod("web", "i"))], &[]).is_empty(), "same content: no SET");
}

#[test]
fn a_moved_directory_is_found_again_at_its_path() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    assert_eq!(
        h.events(vec![itself(DIR_WATCH, "self_moved")]).last().unwrap(),
        &format!("locate {DIR}")
    );
}

#[test]
fn the_parent_watch_gone_while_the_directory_is_unwatched_watches_again() {
    let mut h = Harness::dir();
    h.step(Input::Start);
    h.step(Input::Armed { dir: None, parent: Some(id(PARENT_WATCH)) });
    h.step(Input::Listed(Listing::Missing));
    let actions = h.events(vec![Event::WatchGone(id(PARENT_WATCH))]);
    assert_eq!(actions, [format!("arm dir={DIR} parent={PARENT}")]);
    assert!(h.step(Input::Armed { dir: None, parent: None }).is_empty());
    assert_eq!(h.wake_ms(), Some(250), "then backs off");
}

#[test]
fn the_path_turning_into_a_file_drops_the_directory_s_pods() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    h.events(vec![itself(DIR_WATCH, "self_deleted")]);
    let file = Target::File { dir: PARENT.into(), name: "manifests".into() };
    let actions = h.step(Input::Located(file));
    assert_eq!(
        actions,
        [format!("unwatch {} Entries", id(PARENT_WATCH)), format!("arm dir={PARENT} parent=/etc")]
    );
    h.step(Input::Armed { dir: Some(id(5)), parent: Some(id(6)) });
    let listing = vec!["manifests".into(), "other.yaml".into()];
    assert_eq!(h.step(Input::Listed(Listing::Names(listing))), ["read manifests"]);
    let actions = h.answer(&[], &[]);
    assert_eq!(actions, ["set []"], "the directory's pods went with it, though nothing was read");
}

#[test]
fn a_single_manifest_file_is_the_only_name_read() {
    let file = Target::File { dir: PARENT.into(), name: "web.manifest".into() };
    let mut h = Harness::new(file);
    assert_eq!(h.step(Input::Start), [format!("arm dir={PARENT} parent=/etc")]);
    h.step(Input::Armed { dir: Some(id(DIR_WATCH)), parent: Some(id(PARENT_WATCH)) });
    let listing = vec!["web.manifest".into(), "other.yaml".into(), "d".into()];
    assert_eq!(h.step(Input::Listed(Listing::Names(listing))), ["read web.manifest"]);
    h.answer(&[("web.manifest", pod("web", "i"))], &[]);
    assert!(h.events(vec![entry(DIR_WATCH, "other.yaml", "create|close_write")]).is_empty());
    assert_eq!(
        h.events(vec![entry(DIR_WATCH, "web.manifest", "create|close_write")]),
        ["read web.manifest"]
    );
}

// Symlinks.

#[test]
fn a_symlinked_manifest_follows_its_target() {
    let mut h = Harness::dir();
    h.start_watched();
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    let links = HashMap::from([("web.yaml", "/srv/real/web.yaml")]);
    let actions = h.answer_linked(&[("web.yaml", pod("web", "img:1"))], &links, &[]);
    assert_eq!(
        actions,
        strings(&[
            "added web.yaml (rescan)",
            "links +/srv/real/web.yaml>web.yaml",
            "set [web-node-a]"
        ])
    );
    let linked =
        vec![(id(5), vec![Link { target: "web.yaml".into(), manifest: "web.yaml".into() }])];
    assert!(h.step(Input::Linked(linked)).is_empty());
    // The target is written: the manifest pointing at it is read.
    assert_eq!(h.events(vec![entry(5, "web.yaml", "modify|close_write")]), ["read web.yaml"]);
    let actions = h.answer_linked(&[("web.yaml", pod("web", "img:2"))], &links, &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"]);
    // Other files beside the target are none of ours.
    assert!(h.events(vec![entry(5, "other.yaml", "create|close_write")]).is_empty());
}

#[test]
fn a_new_symlinked_manifest_is_scanned_to_watch_its_target() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    assert_eq!(h.events(vec![entry(DIR_WATCH, "api.yaml", "create")]), ["read api.yaml"]);
    let links = HashMap::from([("api.yaml", "/srv/real/api.yaml")]);
    let actions = h.answer_linked(&[("api.yaml", pod("api", "i"))], &links, &[]);
    assert_eq!(actions, [format!("list {DIR}")], "not taken before its target is watched");
    assert_eq!(h.read, ["api.yaml"]);
    h.step(Input::Listed(Listing::Names(vec!["api.yaml".into(), "web.yaml".into()])));
    let actions = h.answer_linked(
        &[("api.yaml", pod("api", "i")), ("web.yaml", pod("web", "i"))],
        &links,
        &[],
    );
    assert_eq!(
        actions,
        strings(&[
            "added api.yaml (rescan)",
            "links +/srv/real/api.yaml>api.yaml",
            "set [api-node-a web-node-a]",
        ])
    );
}

/// Kubernetes' atomic writer: files → `..data/<file>`, `..data` → `..<timestamp>`.
#[test]
fn configmap_style_data_symlink_swap_rescans() {
    let mut h = Harness::dir();
    h.start_watched();
    let listing = ["..2026_1", "..data", "web.yaml"].map(OsString::from).to_vec();
    assert_eq!(h.step(Input::Listed(Listing::Names(listing))), ["read web.yaml"]);
    let links = HashMap::from([("web.yaml", "/etc/outpost/manifests/..2026_1/web.yaml")]);
    let actions = h.answer_linked(&[("web.yaml", pod("web", "img:1"))], &links, &[]);
    assert!(actions.contains(&"links +/etc/outpost/manifests/..2026_1/web.yaml>web.yaml".into()));
    let linked =
        vec![(id(5), vec![Link { target: "web.yaml".into(), manifest: "web.yaml".into() }])];
    h.step(Input::Linked(linked));
    // The update: a new directory (rescan at once), or only a symlink renamed over `..data`
    // (looked at first).
    assert_eq!(
        h.events(vec![entry(DIR_WATCH, "..2026_2", "create|is_dir")]),
        [format!("list {DIR}")]
    );
    let listing = ["..2026_1", "..2026_2", "..data", "web.yaml"].map(OsString::from).to_vec();
    h.step(Input::Listed(Listing::Names(listing)));
    let links = HashMap::from([("web.yaml", "/etc/outpost/manifests/..2026_2/web.yaml")]);
    let actions = h.answer_linked(&[("web.yaml", pod("web", "img:2"))], &links, &[]);
    assert_eq!(
        actions,
        strings(&[
            "changed web.yaml (rescan)",
            "links -watch#5 +/etc/outpost/manifests/..2026_2/web.yaml>web.yaml",
            "set [web-node-a]",
        ])
    );
    h.step(Input::Linked(vec![(
        id(6),
        vec![Link { target: "web.yaml".into(), manifest: "web.yaml".into() }],
    )]));
    let swap = vec![
        entry(DIR_WATCH, "..data_tmp", "create"),
        entry(DIR_WATCH, "..data_tmp", "moved_from"),
        entry(DIR_WATCH, "..data", "moved_to"),
    ];
    assert_eq!(h.events(swap), ["look ..data_tmp ..data"]);
    assert_eq!(h.answer(&[], &["..data"]), [format!("list {DIR}")]);
}

#[test]
fn symlinks_and_directories_beside_plain_manifests_change_nothing() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    let batch =
        vec![entry(DIR_WATCH, "..data", "moved_to"), entry(DIR_WATCH, "v2.d", "create|is_dir")];
    assert!(h.events(batch).is_empty(), "no symlinked manifest: nothing to look at");
}

#[test]
fn a_look_at_a_plain_file_changes_nothing() {
    let mut h = Harness::dir();
    h.start_watched();
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    let links = HashMap::from([("web.yaml", "/srv/web.yaml")]);
    h.answer_linked(&[("web.yaml", pod("web", "i"))], &links, &[]);
    h.step(Input::Linked(vec![(
        id(5),
        vec![Link { target: "web.yaml".into(), manifest: "web.yaml".into() }],
    )]));
    assert_eq!(h.events(vec![entry(DIR_WATCH, ".tmp123", "create")]), ["look .tmp123"]);
    assert!(h.answer(&[], &[]).is_empty());
}

// The protocol itself.

#[test]
fn events_of_unknown_watches_and_stray_results_are_ignored() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    assert!(h.events(vec![entry(99, "web.yaml", "close_write")]).is_empty());
    assert!(h.events(vec![Event::WatchGone(id(99))]).is_empty());
    assert!(h.step(Input::Listed(Listing::Missing)).is_empty(), "no listing was asked for");
    assert!(h.step(Input::Located(Target::Dir("/elsewhere".into()))).is_empty());
    assert!(h.step(Input::Start).is_empty());
    // Still working.
    assert_eq!(h.events(vec![entry(DIR_WATCH, "web.yaml", "delete")]), ["read web.yaml"]);
}

#[test]
fn the_machine_does_not_wake_while_a_result_is_awaited() {
    let mut h = Harness::with(&[("web.yaml", pod("web", "i"))]);
    h.events(vec![entry(DIR_WATCH, "a.yaml", "modify")]);
    assert_eq!(h.wake_ms(), Some(250));
    h.events(vec![entry(DIR_WATCH, "web.yaml", "close_write")]);
    assert_eq!(h.wake, None, "reading");
    h.answer(&[("web.yaml", pod("web", "i"))], &[]);
    assert_eq!(h.wake_ms(), Some(250), "the quiet file waits on");
}

#[test]
fn link_watches_work_on_while_the_directory_is_unwatched() {
    // The watch limit was hit by the directory and its parent, not by a link target's.
    let mut h = Harness::dir();
    h.step(Input::Start);
    h.step(Input::Armed { dir: None, parent: None });
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    let links = HashMap::from([("web.yaml", "/srv/web.yaml")]);
    h.answer_linked(&[("web.yaml", pod("web", "img:1"))], &links, &[]);
    let link = Link { target: "web.yaml".into(), manifest: "web.yaml".into() };
    h.step(Input::Linked(vec![(id(5), vec![link])]));
    assert_eq!(h.wake_ms(), Some(250));
    h.at(100);
    assert_eq!(h.events(vec![entry(5, "web.yaml", "close_write")]), ["read web.yaml"]);
    let actions = h.answer_linked(&[("web.yaml", pod("web", "img:2"))], &links, &[]);
    assert_eq!(actions, ["changed web.yaml (pid 42)", "set [web-node-a]"]);
    assert_eq!(h.wake_ms(), Some(250), "the retry stays due");
    // A link watch gone: watched again, and scanned, which covers the read asked for.
    let batch = vec![entry(5, "web.yaml", "close_write"), Event::WatchGone(id(5))];
    assert_eq!(h.events(batch), [format!("arm dir={DIR} parent={PARENT}")]);
    let actions = h.step(Input::Armed { dir: None, parent: None });
    assert_eq!(actions, [format!("list {DIR}")]);
    h.step(Input::Listed(Listing::Names(vec!["web.yaml".into()])));
    h.answer_linked(&[("web.yaml", pod("web", "img:2"))], &links, &[]);
    assert_eq!(h.wake_ms(), Some(100 + 500), "backing off from the last delay");
}
