//! The driver: how scenarios become test trials, the loop that runs
//! many at once (longest first, by what each cost last time: `costs`), one scenario's run turned into a report, and what its outcome means for whoever asked.
pub mod costs;
pub mod runner;
pub mod scenario;

pub mod trials;
pub mod verdict;
