// Command evactl validates, renders and publishes Eva tenants.
package main

import (
	"os"

	"github.com/aidonow/eva/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
