package regtest

import (
	"net/http"
	"testing"
)

func TestStartAndProxy(t *testing.T) {
	r := Start(t, Config{User: "u", Password: "p"})
	p := NewProxy(t, r.Host)
	resp, err := http.Get("http://" + p.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("want 401 from an htpasswd registry without credentials, got %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.Host+"/v2/", nil)
	req.SetBasicAuth("u", "p")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("want 200 with credentials, got %d", resp.StatusCode)
	}
	if got := len(p.Requests()); got != 2 {
		t.Fatalf("proxy saw %d requests, want 2:\n%s", got, p.Dump())
	}
}
