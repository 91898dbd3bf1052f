//! Node containers: the image they run, the containers themselves, and the host state they touch.
pub mod capacity;
pub mod container;
pub mod dmi;
pub mod image;
pub mod kind_image;
pub mod sysctl;
