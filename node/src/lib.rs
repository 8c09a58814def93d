//! locksmith's native Node addon.
