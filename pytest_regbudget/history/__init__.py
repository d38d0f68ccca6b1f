"""The baseline file's history, read out of git: each version of the file the branch's commits left, parsed
into core/trend's samples, and remembered by blob in the cache directory. Runs git; imports core/ and build/'s
document store."""
