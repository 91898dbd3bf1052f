//! `nodejoin compare`: the same scenarios against two versions of a bootstrap, and what differs on the node.
//! `snapshot` is what one run showed (normalised for instance identity), `diff` finds the differences between
//! two runs' snapshots and whether they break a check, `render` prints them as text, JSON or Markdown, and
//! `variant` is what a side (`--base`, `--head`) puts into the scenarios.
pub mod diff;
pub mod render;
pub mod snapshot;
pub mod variant;
