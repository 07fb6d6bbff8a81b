// Command coredns is the local cluster's DNS server: CoreDNS with only the
// plugins the local cluster's Corefile uses (Services by name from the API server,
// everything else forwarded to this machine's resolver), so its cold build
// stays short.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func main() { coremain.Run() }
