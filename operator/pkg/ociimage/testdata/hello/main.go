// Command hello is the tiny binary the ociimage tests put into an image:
// --help prints usage, -check reports what the image gives a process.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/user"
)

func main() {
	check := flag.Bool("check", false, "print the user, whether / and /tmp are writable and the CA bundle size")
	flag.Parse()
	if !*check {
		fmt.Println("hello")
		return
	}
	u, err := user.Current()
	if err != nil {
		fmt.Println("user:", err)
	} else {
		fmt.Printf("user: %s %s:%s home=%s\n", u.Username, u.Uid, u.Gid, u.HomeDir)
	}
	fmt.Println("root writable:", writable("/"))
	fmt.Println("tmp writable:", writable(os.TempDir()))
	if data, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		fmt.Println("ca bytes:", len(data))
	}
}

func writable(dir string) bool {
	f, err := os.CreateTemp(dir, "probe-")
	if err != nil {
		return false
	}
	_ = f.Close()
	_ = os.Remove(f.Name())
	return true
}
