package service

// ForksChunk is how many forks ListForks reads from the store at a time.
const ForksChunk = forksChunk
