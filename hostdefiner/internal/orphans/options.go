package orphans

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
)

// Summary is the command's one-line description.
const Summary = "List directories no PV refers to, and PVs whose directory is missing, per node and pool (reads only)"

// Help is the command's description, before its flags.
var Help = `Compares, on every node and pool, the volume directories the hostpath
managers hold with the PersistentVolumes of the provisioner, and prints:

  orphan       a directory no PV refers to, with its owner record (typically
               an owner PV that no longer exists)
  retained     a directory no PV refers to whose owner PV was deleted with
               reclaim policy Retain: kept on purpose
  misplaced    a directory no PV refers to whose owner PV exists but names
               another place (a renamed pool, say): never removed
  missing      a PV whose directory is not on a node it should be on (its
               node; for a multihost PV, each node of hostpath.dev/nodes)
  pending      a multihost PV whose directory is not yet on a node of its
               hostpath.dev/pending-nodes (the host definer gives it)
  unreachable  a node, or a pool of it, whose manager could not be listed
               (no Ready manager pod, TLS, token, HTTP): its findings are
               unknown

It never deletes or changes anything.

The managers are called on their pod IPs (port --manager-port), so pod IPs
must be reachable from where this runs: run it on a node, or in a pod
labelled hostpath.dev/manager-client=true (the managers' NetworkPolicy admits
such pods), or port-forward to each manager and pass
--manager-address NODE=127.0.0.1:PORT. Each manager's certificate is verified
against the CA bundle ConfigMap ` + managerapi.CABundleConfigMap + ` for the name
` + managerapi.ServerName("NODE") + `. The bearer token is a TokenRequest for
--service-account (audience ` + managerapi.TokenAudience + `, 10 minutes; by default
` + DefaultServiceAccount + `, which may only read), or the content of --token-file.

Exit status: 0 when nothing is found, 1 when something is (any finding,
retained and pending included; --exit-zero gives 0), 2 on a usage or API
server error.

Examples:
  kubectl hostpath orphans
  kubectl hostpath orphans -o json | jq '.findings[] | select(.finding == "orphan")'
  kubectl -n hostpath-system port-forward pod/hostpath-manager-abcde 18443:8443 &
  kubectl hostpath orphans --manager-address node-1=127.0.0.1:18443`

// Flag names.
const (
	FlagKubeconfig      = "kubeconfig"
	FlagContext         = "context"
	FlagNamespace       = "namespace"
	FlagProvisionerName = "provisioner-name"
	FlagManagerSelector = "manager-selector"
	FlagManagerPort     = "manager-port"
	FlagManagerAddress  = "manager-address"
	FlagManagerTimeout  = "manager-timeout"
	FlagTokenFile       = "token-file"
	FlagServiceAccount  = "service-account"
	FlagOutput          = "output"
	FlagExitZero        = "exit-zero"
)

// Defaults.
const (
	// DefaultNamespace is the product's namespace.
	DefaultNamespace = "hostpath-system"
	// DefaultServiceAccount is the read-only service account that
	// manifests/ installs for this report, bound to the ClusterRole
	// hostpath-manager-reader, in --namespace.
	DefaultServiceAccount = managerapi.OrphansServiceAccount
	// DefaultManagerSelector selects the manager pods.
	DefaultManagerSelector = "app.kubernetes.io/name=hostpath-manager"
	// TokenLifetime is the lifetime of the TokenRequest's token (the
	// shortest the API server grants).
	TokenLifetime = 10 * time.Minute
)

// The values of --output.
const (
	OutputTable = "table"
	OutputJSON  = "json"
)

// Options are the flags of `kubectl hostpath orphans`.
type Options struct {
	Kubeconfig       string
	Context          string
	Namespace        string
	ProvisionerName  string
	ManagerSelector  string
	ManagerPort      int
	ManagerAddresses []string
	ManagerTimeout   time.Duration
	TokenFile        string
	ServiceAccount   string
	Output           string
	ExitZero         bool

	// addresses is ManagerAddresses parsed by Validate.
	addresses map[string]string
}

// NewOptions returns Options with their defaults.
func NewOptions() *Options {
	return &Options{
		Namespace:       DefaultNamespace,
		ProvisionerName: hostpathv1.DefaultProvisionerName,
		ManagerSelector: DefaultManagerSelector,
		ManagerPort:     managerapi.ServingPort,
		ManagerTimeout:  managerapi.DefaultCallTimeout,
		ServiceAccount:  DefaultServiceAccount,
		Output:          OutputTable,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, FlagKubeconfig, o.Kubeconfig, "The kubeconfig file to reach the API server with. Defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster configuration.")
	fs.StringVar(&o.Context, FlagContext, o.Context, "The kubeconfig context to use. Defaults to the current context.")
	fs.StringVarP(&o.Namespace, FlagNamespace, "n", o.Namespace, "The product's namespace: the manager pods, the CA bundle ConfigMap "+managerapi.CABundleConfigMap+" and, by default, the service account.")
	fs.StringVar(&o.ProvisionerName, FlagProvisionerName, o.ProvisionerName, "The provisioner name of the PersistentVolumes and StorageClasses compared, besides "+hostpathv1.CapacityProvisionerName+" (always compared); others are ignored.")
	fs.StringVar(&o.ManagerSelector, FlagManagerSelector, o.ManagerSelector, "The label selector of the manager pods in --"+FlagNamespace+".")
	fs.IntVar(&o.ManagerPort, FlagManagerPort, o.ManagerPort, "The managers' HTTPS port, called on the Ready manager pod's IP.")
	fs.StringArrayVar(&o.ManagerAddresses, FlagManagerAddress, o.ManagerAddresses, "NODE=HOST:PORT: call the manager of NODE there instead of on its pod IP (a port-forward, say); repeat for more nodes. The certificate must still be NODE's.")
	fs.DurationVar(&o.ManagerTimeout, FlagManagerTimeout, o.ManagerTimeout, "The time limit of each manager call.")
	fs.StringVar(&o.TokenFile, FlagTokenFile, o.TokenFile, "A file holding the bearer token sent to the managers (audience "+managerapi.TokenAudience+"). Empty asks for a TokenRequest for --"+FlagServiceAccount+" instead.")
	fs.StringVar(&o.ServiceAccount, FlagServiceAccount, o.ServiceAccount, "The service account whose token (TokenRequest, audience "+managerapi.TokenAudience+", 10 minutes, bound to no pod) is sent to the managers, as NAME in --"+FlagNamespace+" or NAMESPACE/NAME; it needs get hosts and list pools/volumes, as the ClusterRole "+managerapi.ReaderClusterRole+" grants (the default, "+DefaultServiceAccount+", is bound to it). Not used with --"+FlagTokenFile+".")
	fs.StringVarP(&o.Output, FlagOutput, "o", o.Output, "The output format: table or json.")
	fs.BoolVar(&o.ExitZero, FlagExitZero, o.ExitZero, "Exit 0 even when something is found (errors still exit 2).")
}

// Validate reports every option that cannot work.
func (o *Options) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--%s %q: %s", FlagNamespace, o.Namespace, strings.Join(msgs, "; ")))
	}
	if o.ProvisionerName == "" {
		errs = append(errs, fmt.Errorf("--%s must not be empty", FlagProvisionerName))
	}
	if sel, err := labels.Parse(o.ManagerSelector); err != nil || sel.Empty() {
		errs = append(errs, fmt.Errorf("--%s %q: want a non-empty label selector: %v", FlagManagerSelector, o.ManagerSelector, err))
	}
	if o.ManagerPort < 1 || o.ManagerPort > 65535 {
		errs = append(errs, fmt.Errorf("--%s %d: want a port from 1 to 65535", FlagManagerPort, o.ManagerPort))
	}
	if o.ManagerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--%s must be positive", FlagManagerTimeout))
	}
	if o.TokenFile == "" {
		if _, _, err := o.serviceAccount(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Output != OutputTable && o.Output != OutputJSON {
		errs = append(errs, fmt.Errorf("--%s %q: want %s or %s", FlagOutput, o.Output, OutputTable, OutputJSON))
	}
	o.addresses = map[string]string{}
	for _, a := range o.ManagerAddresses {
		node, addr, ok := strings.Cut(a, "=")
		_, _, err := net.SplitHostPort(addr)
		switch {
		case !ok || node == "" || err != nil:
			errs = append(errs, fmt.Errorf("--%s %q: want NODE=HOST:PORT", FlagManagerAddress, a))
		case o.addresses[node] != "":
			errs = append(errs, fmt.Errorf("--%s: node %q given twice", FlagManagerAddress, node))
		default:
			o.addresses[node] = addr
		}
	}
	return errors.Join(errs...)
}

// serviceAccount returns the namespace and name of --service-account.
func (o *Options) serviceAccount() (string, string, error) {
	ns, name, ok := strings.Cut(o.ServiceAccount, "/")
	if !ok {
		ns, name = o.Namespace, o.ServiceAccount
	}
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", fmt.Errorf("--%s %q: want NAME or NAMESPACE/NAME of a service account", FlagServiceAccount, o.ServiceAccount)
	}
	return ns, name, nil
}

// Run scans the cluster and prints the report. It returns whether the
// command should exit 1: something was found, and not --exit-zero.
func (o *Options) Run(ctx context.Context, out io.Writer) (bool, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return false, fmt.Errorf("load the API client configuration: %w", err)
	}
	cfg.UserAgent = "kubectl-hostpath"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, fmt.Errorf("build the Kubernetes client: %w", err)
	}
	return o.run(ctx, kube, out)
}

// run is Run with a clientset.
func (o *Options) run(ctx context.Context, kube kubernetes.Interface, out io.Writer) (bool, error) {
	opts := managerapi.CallerOptions(o.TokenFile, o.ManagerTimeout, 0)
	tokenText := fmt.Sprintf("the file %s", o.TokenFile)
	if o.TokenFile == "" {
		ns, name, err := o.serviceAccount()
		if err != nil {
			return false, err
		}
		token, err := requestToken(ctx, kube, ns, name)
		if err != nil {
			return false, err
		}
		opts = append(opts, managerapi.WithToken(managerapi.StaticToken(token)))
		tokenText = fmt.Sprintf("a TokenRequest for service account %s/%s (audience %s, %s)", ns, name, managerapi.TokenAudience, TokenLifetime)
	}
	bundle, err := caBundle(ctx, kube, o.Namespace)
	if err != nil {
		return false, err
	}
	s := &Scanner{
		Kube: kube, Namespace: o.Namespace, Provisioner: hostpathv1.NewProvisionerNames(o.ProvisionerName),
		ManagerSelector: o.ManagerSelector, ManagerPort: o.ManagerPort, Addresses: o.addresses,
		Dial: ClientDial(bundle, opts...),
	}
	report, err := s.Scan(ctx)
	if err != nil {
		return false, err
	}
	report.Token = tokenText
	if err := Write(out, report, o.Output); err != nil {
		return false, err
	}
	return len(report.Findings) > 0 && !o.ExitZero, nil
}

// requestToken returns a token of ns/name for the managers' audience,
// valid for TokenLifetime.
func requestToken(ctx context.Context, kube kubernetes.Interface, ns, name string) (string, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{managerapi.TokenAudience},
		ExpirationSeconds: ptr.To(int64(TokenLifetime / time.Second)),
	}}
	res, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token for service account %s/%s (or pass --%s): %w", ns, name, FlagTokenFile, err)
	}
	return res.Status.Token, nil
}

// caBundle returns the CA bundle the managers' certificates are verified
// with, from its ConfigMap in ns.
func caBundle(ctx context.Context, kube kubernetes.Interface, ns string) (*trust.Bundle, error) {
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, managerapi.CABundleConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the managers' CA bundle: %w", err)
	}
	b := trust.NewBundle()
	if err := b.Set([]byte(cm.Data[managerapi.CABundleKey])); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s, key %s: %w", ns, managerapi.CABundleConfigMap, managerapi.CABundleKey, err)
	}
	return b, nil
}

// ClientDial returns a Dial that calls the managers over HTTPS with a
// managerapi.Client of opts (the token, the time limits), verifying each
// manager's certificate for managerapi.ServerName of its node against bundle.
func ClientDial(bundle *trust.Bundle, opts ...managerapi.Option) Dial {
	return func(node, address string) (Manager, error) {
		o := append(slices.Clip(opts), managerapi.WithServerTLS(bundle.Pool, managerapi.ServerName(node)))
		return managerapi.New("https://"+address, o...)
	}
}
