package app

import (
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/oslayer/oslayer/extension/pkg/admission"
)

// addWebhookFlags registers the admission webhook's flags.
func addWebhookFlags(fs *pflag.FlagSet, o *Options) {
	fs.IntVar(&o.WebhookPort, "webhook-port", 0, "serve the Shoot admission webhook ("+admission.Path+") over TLS on this port (0: off)")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "directory of the webhook's tls.crt and tls.key")
	fs.BoolVar(&o.AdmissionOnly, "admission-only", false, "serve only the Shoot admission webhook (needs --webhook-port): no controller, no API server connection")
}

// webhookServer is the manager's webhook server (nil: no webhook).
func webhookServer(o Options) webhook.Server {
	if o.WebhookPort <= 0 {
		return nil
	}
	return webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
}

// addWebhook serves the validating admission webhook for the Shoots'
// providerConfigs of the extension's type (package admission).
func addWebhook(mgr manager.Manager, o Options) {
	if o.WebhookPort <= 0 {
		return
	}
	mgr.GetWebhookServer().Register(admission.Path, &webhook.Admission{Handler: &admission.ShootValidator{Type: o.Type}})
}
