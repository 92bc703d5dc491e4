// Command controller-manager runs this project's controllers: App, Pipeline,
// Ingress and Cleanup, under leader election, kube-controller-manager style.
package main

import (
	"os"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
