//! Shared code of the gdrcopy tools.
