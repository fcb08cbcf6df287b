//go:build linux && (amd64 || arm64)

package main

import (
	"io"
	"os"
	"syscall"
)

// fadvDontNeed is POSIX_FADV_DONTNEED.
const fadvDontNeed = 4

// dropCache drops path's pages from the page cache, so the next process started from it
// reads the binary from disk as a server does on a cold start. Without it the figure depends
// on how the file entered the cache: a binary the Go linker has just written is cached in
// large folios, and every page a process touches then maps a whole folio (about 10 MB more
// RssFile for quiver than after a cold start, measured on Linux 6.18 with ext4).
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // dirty pages cannot be dropped
		return err
	}
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}

// copyExecutable copies the binary at src to dst, so rssbench alone maps the copy (another
// process mapping a binary keeps its pages in the cache) and dropCache can empty it.
func copyExecutable(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
