//go:build unix

package ociimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Command runs the entrypoint of an image unpacked into root (see Unpack)
// on this machine: as root it is confined to root (chroot) and runs as the
// image's user, as a container would; otherwise it runs root/<binary>
// directly as the current user.
func Command(root, binary string, args ...string) *exec.Cmd {
	if os.Geteuid() != 0 {
		cmd := exec.Command(filepath.Join(root, binary), args...)
		cmd.Dir = root
		return cmd
	}
	cmd := exec.Command("/"+binary, args...)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: NonrootID, Gid: NonrootID},
	}
	return cmd
}
