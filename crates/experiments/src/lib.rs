//! The experiments that check the project's claims, each a library function returning a report
//! (the CLI only parses arguments and prints).
pub mod classic;
