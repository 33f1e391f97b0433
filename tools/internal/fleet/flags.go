package fleet

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	hostpathclient "hostpath.dev/api/generated/clientset/versioned"
	"hostpath.dev/api/runtime/component"
)

// Flags are the command-line flags that the benchmarks over a fleet
// share ("benchfleet run" and "benchfleet foreign"): those of the Options,
// the cluster's kubeconfig, the provisioners' arguments as JSON and the
// file of the result.
type Flags struct {
	// Kubeconfig is the cluster's kubeconfig, an administrator's.
	Kubeconfig string
	// ProvisionerArgs is a JSON array of strings that Complete parses into
	// Options.ProvisionerArgs.
	ProvisionerArgs string
	// Out is the file of the result as JSON; empty: none.
	Out string
}

// AddFlags binds the fleet's flags to fs: the kubeconfig, the
// provisioners' arguments and the result's file to f, the rest to o's
// fields.
func (f *Flags) AddFlags(fs *flag.FlagSet, o *Options) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig of the cluster, an administrator's (default: $KUBECONFIG).")
	fs.StringVar(&o.Namespace, "namespace", "hostpath-system", "The product's namespace.")
	fs.StringVar(&o.Prefix, "prefix", "hostpath-fleet-", "Name prefix of the fleet's fake nodes.")
	fs.StringVar(&o.Dir, "dir", "", "Folder for the members' pools, state, tokens and logs (required).")
	fs.StringVar(&o.ManagerBin, "manager-bin", "", "The manager binary (required).")
	fs.StringVar(&o.ProvisionerBin, "provisioner-bin", "", "The provisioner binary (required).")
	fs.StringVar(&f.ProvisionerArgs, "provisioner-args", "[]", "JSON array of the provisioner DaemonSet's arguments, given to every provisioner first.")
	fs.StringVar(&o.AddressPrefix, "address-prefix", "198.18.250.", "First three bytes of the members' addresses, with the dot.")
	fs.StringVar(&o.Device, "device", "hpapi", "Network device that gets the members' addresses.")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 2*time.Minute, "Bound of the wait for a member's processes to be ready.")
	fs.IntVar(&o.Workers, "start-workers", 8, "Members started at once.")
	fs.StringVar(&f.Out, "out", "", "File for the result as JSON (default: none).")
}

// Complete parses --provisioner-args into o.ProvisionerArgs.
func (f *Flags) Complete(o *Options) error {
	if err := json.Unmarshal([]byte(f.ProvisionerArgs), &o.ProvisionerArgs); err != nil {
		return fmt.Errorf("--provisioner-args: %w", err)
	}
	return nil
}

// Clients returns the benchmark's clients of the cluster of the
// kubeconfig, not rate limited (the benchmark's own client must never be
// what limits the figures), and sets o's API server and its CA to the
// kubeconfig's current context's cluster.
func (f *Flags) Clients(o *Options) (kubernetes.Interface, hostpathclient.Interface, error) {
	cfg, err := component.RESTConfig(f.Kubeconfig, 1000, 2000, "hostpath-benchfleet")
	if err != nil {
		return nil, nil, err
	}
	raw, err := clientcmd.LoadFromFile(f.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", f.Kubeconfig, err)
	}
	cc := raw.Contexts[raw.CurrentContext]
	if cc == nil || raw.Clusters[cc.Cluster] == nil {
		return nil, nil, fmt.Errorf("%s: no cluster in the current context %q", f.Kubeconfig, raw.CurrentContext)
	}
	cl := raw.Clusters[cc.Cluster]
	o.Server, o.CAData = cl.Server, cl.CertificateAuthorityData
	if len(o.CAData) == 0 && cl.CertificateAuthority != "" {
		if o.CAData, err = os.ReadFile(cl.CertificateAuthority); err != nil {
			return nil, nil, fmt.Errorf("read the cluster's CA: %w", err)
		}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the Kubernetes client: %w", err)
	}
	hp, err := hostpathclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("the hostpath client: %w", err)
	}
	return kube, hp, nil
}
