package main

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// etcd is the cluster's store; its down stops it (its data goes with the
// state directory).
type etcd struct{}

func (etcd) Name() string { return "etcd" }

// daemon keeps its data below the state directory; a throw-away cluster
// does not need durable writes (--unsafe-no-fsync).
func (etcd) daemon(ac *actionContext) daemon {
	dir := filepath.Join(ac.state, "etcd")
	client := "http://127.0.0.1:" + strconv.Itoa(ac.etcdPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(ac.etcdPeerPort)
	return daemon{name: "etcd", path: filepath.Join(ac.assets, "etcd"), config: dir, grace: 5 * time.Second, args: []string{
		"--name=local", "--unsafe-no-fsync",
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--data-dir=" + dir, // last: stop tells its process by it
	}}
}

// Up starts it and waits for its port.
func (e etcd) Up(ctx context.Context, ac *actionContext) error {
	if err := ac.start(e.daemon(ac)); err != nil {
		return err
	}
	return ac.waitListening(ctx, "etcd", "etcd", net.JoinHostPort("127.0.0.1", strconv.Itoa(ac.etcdPort)))
}

func (e etcd) Down(_ context.Context, ac *actionContext) error { return ac.stop(e.daemon(ac)) }
