// Command etcd is etcd's own server entry point, built from the go.etcd.io/etcd/server/v3 version
// that k8s.io/kubernetes pins (the etcd repository's root main package is not a separate module).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
