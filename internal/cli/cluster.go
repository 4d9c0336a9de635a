package cli

import (
	"fmt"
	"os"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// clusterFlags name the cluster a command reads, as kubectl names it: --kubeconfig
// (else $KUBECONFIG, else ~/.kube/config) and --context (else the kubeconfig's current
// context).
type clusterFlags struct{ kubeconfig, context string }

func (c *clusterFlags) bind(f *pflag.FlagSet, usage string) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", usage+" (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the kubeconfig's current context)")
}

// explicit reports whether a flag names the cluster.
func (c *clusterFlags) explicit() bool { return c.kubeconfig != "" || c.context != "" }

// named reports whether a cluster is named at all: a flag, or $KUBECONFIG.
func (c *clusterFlags) named() bool { return c.explicit() || os.Getenv("KUBECONFIG") != "" }

func (c *clusterFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
}

// server is the API server's address, for messages ("" when the kubeconfig does not
// load).
func (c *clusterFlags) server() string {
	cfg, err := c.loader().ClientConfig()
	if err != nil {
		return ""
	}
	return cfg.Host
}

// client builds a client for the EvaTenant and HelmRelease APIs, and the namespace to
// use: namespace, else the context's.
func (c *clusterFlags) client(namespace string) (client.Client, string, error) {
	loader := c.loader()
	rest, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	if err := evav1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := helmv2.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	cl, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the cluster: %w", err)
	}
	return cl, namespace, nil
}
