"""The synthetic knowledge base the ticket generator draws from: per category, issue types with one runbook article,
a reference resolution, whether they call for escalation, and ticket templates.

Placeholders filled per ticket: ``{host}``, ``{site}``, ``{user}``, ``{when}``. Resolutions summarise the runbook in
other words and state every one of its steps as an instruction of its own, in the runbook's order (every runbook is
an ordered procedure; the resolution reward's step rule checks that each reference is a right fix for its own runbook
and for no other); an honest answer paraphrases, a verbatim copy of the article is what the repetition penalty's copy
check catches.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Issue:
    """One kind of problem: its runbook article, its gold resolution and the tickets users file about it."""

    key: str
    category: str
    title: str
    steps: tuple[str, ...]
    resolution: str
    escalate: bool
    subjects: tuple[str, ...]
    bodies: tuple[str, ...]


CATEGORIES = ("networking", "security", "cloud", "infrastructure")
PREFIX = {"networking": "NET", "security": "SEC", "cloud": "CLD", "infrastructure": "INF"}

ESCALATION_ARTICLES = {
    c: (
        f"{c.capitalize()} escalation policy",
        (
            "Open a P1 incident and page the on-call engineer when there is a security exposure, data loss risk or "
            "a failed hardware component.",
            "Attach the ticket, the evidence collected so far and the affected hosts.",
            "Do not close the ticket yourself: the on-call team owns it until the incident review.",
        ),
    )
    for c in CATEGORIES
}

SLOTS = {
    "host": ("edge-rtr-01", "core-sw-02", "web-07", "db-03", "vpn-gw-01", "app-12", "k8s-node-4", "files-02"),
    "site": ("Dallas", "Bangalore", "Frankfurt", "Ashburn", "Singapore", "Toronto"),
    "user": ("a.khan", "m.lopez", "j.chen", "s.okafor", "r.iyer", "t.muller"),
    "when": (
        "after the Tuesday maintenance window",
        "since 09:00 this morning",
        "after last night's change",
        "intermittently since Friday",
        "right after the firmware upgrade",
    ),
}

ISSUES = (
    # ------------------------------------------------------------------------------------------------ networking
    Issue(
        "bgp-down",
        "networking",
        "BGP session stuck in Active or Idle",
        (
            "Check the neighbor state with show bgp summary.",
            "Verify the peer IP, remote AS and MD5 password match the peering sheet.",
            "Confirm TCP port 179 is allowed on the ACL.",
            "Clear the session with clear bgp neighbor soft and watch it reach Established.",
        ),
        "Read the neighbor state in show bgp summary, compare the neighbor configuration (peer address, remote AS, MD5 "
        "key) with the peering sheet, make sure the ACL permits TCP 179, then soft-clear the BGP neighbor and confirm "
        "the session is Established.",
        False,
        ("BGP session won't come up on {host}", "BGP neighbor down at {site}"),
        (
            "The BGP session on {host} in {site} has been stuck in Active {when}. Routes from the upstream are missing "
            "and traffic takes the backup path.",
        ),
    ),
    Issue(
        "dns-fail",
        "networking",
        "Internal DNS names do not resolve",
        (
            "Run nslookup against both internal resolvers.",
            "Check the resolver service and its forwarders.",
            "Flush the client cache with ipconfig /flushdns or resolvectl flush-caches.",
            "Verify the zone record exists.",
        ),
        "Test both internal resolvers with nslookup, restart the resolver if a forwarder is failing, flush the DNS "
        "cache on the affected clients (ipconfig /flushdns) and confirm the record exists in the zone.",
        False,
        ("Cannot resolve intranet names", "DNS lookups failing in {site}"),
        (
            "Users in {site} cannot open internal sites by name {when}; pinging {host} by IP works but the name does "
            "not resolve.",
        ),
    ),
    Issue(
        "vpn-auth",
        "networking",
        "VPN client fails to connect",
        (
            "Check the VPN gateway logs for the user's authentication attempts.",
            "Confirm the user's certificate is valid and not revoked.",
            "Re-push the client profile.",
            "Ask the user to reconnect on a wired network.",
        ),
        "Look up the user's attempts in the VPN gateway log, check the client certificate is still valid and renew it "
        "if it expired or was revoked, re-push the VPN profile and have the user reconnect over a wired network.",
        False,
        ("VPN keeps disconnecting for {user}", "{user} cannot connect to VPN"),
        ("{user} gets an authentication error on the VPN to {host} {when}. Other users at {site} connect fine.",),
    ),
    Issue(
        "dhcp-exhaust",
        "networking",
        "Clients get 169.254 addresses (DHCP scope exhausted)",
        (
            "Check the scope utilisation on the DHCP server.",
            "Shorten the lease time or extend the scope.",
            "Remove stale leases.",
            "Verify the relay (ip helper-address) on the VLAN interface.",
        ),
        "Confirm the DHCP scope is full, shorten the lease time or widen the scope, remove stale leases and check the "
        "VLAN's ip helper-address points at the DHCP server.",
        False,
        ("No network on new laptops in {site}", "Clients getting 169.254 addresses"),
        (
            "New laptops on the third floor in {site} get 169.254 addresses {when}. The switch {host} shows the ports "
            "up.",
        ),
    ),
    Issue(
        "packet-loss",
        "networking",
        "Packet loss on an uplink",
        (
            "Run an extended ping and mtr to locate the hop.",
            "Check interface counters for CRC errors.",
            "Replace the optic or cable when CRC errors increase.",
            "Fail traffic over to the redundant uplink.",
        ),
        "Locate the lossy hop with mtr, look for CRC errors on the interface counters, replace the faulty optic or "
        "cable if the CRC errors keep rising and move traffic to the redundant uplink.",
        False,
        ("Packet loss on the {site} uplink", "Calls dropping, packet loss on {host}"),
        ("We see 5-10% packet loss through {host} {when}; voice calls from {site} drop every few minutes.",),
    ),
    Issue(
        "wan-outage",
        "networking",
        "Total WAN outage at a site",
        (
            "Confirm the outage from the monitoring system.",
            "Call the carrier with the circuit id.",
            "Activate the LTE backup.",
            "Escalate to the network on-call if the outage exceeds 15 minutes.",
        ),
        "Confirm the outage in the monitoring system, open a carrier ticket for the circuit, activate the LTE backup "
        "and escalate to the network on-call as a P1 outage after 15 minutes.",
        True,
        ("{site} office completely offline", "Whole site down in {site}"),
        ("Every user in {site} lost connectivity {when}; {host} is unreachable from the data centre.",),
    ),
    # -------------------------------------------------------------------------------------------------- security
    Issue(
        "phishing",
        "security",
        "Reported phishing email",
        (
            "Collect the email headers and the link.",
            "Search the mail gateway for other recipients and purge the message.",
            "Block the sender domain and URL.",
            "Reset the password of anyone who clicked.",
        ),
        "Get the headers and the link from the email, purge the message from all mailboxes via the mail gateway, "
        "block the sender and URL, and reset credentials for anyone who clicked the link.",
        False,
        ("Suspicious email asking for password", "Phishing mail reported by {user}"),
        ("{user} received an email {when} asking to confirm their password on a fake login page. They did not click.",),
    ),
    Issue(
        "malware-alert",
        "security",
        "Endpoint malware alert",
        (
            "Isolate the endpoint from the network with the EDR console.",
            "Preserve memory and disk evidence.",
            "Do not reimage before the security team reviews it.",
            "Escalate to the security on-call.",
        ),
        "Cut the machine off the network from the EDR console, preserve its memory and disk for forensics, leave it "
        "untouched until the security team has looked at it (no reimaging) and escalate to the security on-call as an "
        "incident.",
        True,
        ("EDR alert: trojan detected on {host}", "Antivirus quarantined files on {host}"),
        (
            "The EDR flagged a trojan on {host} used by {user} {when}. The process tried to reach an unknown external "
            "IP.",
        ),
    ),
    Issue(
        "mfa-reset",
        "security",
        "User lost their MFA device",
        (
            "Verify the user's identity through the manager or a video call.",
            "Revoke the old MFA registrations.",
            "Issue a temporary access pass.",
            "Have the user enrol the new device.",
        ),
        "Verify the user's identity with their manager or on a video call, revoke the lost MFA registrations, issue a "
        "temporary access pass and walk the user through enrolling the new phone.",
        False,
        ("Lost phone, cannot pass MFA", "{user} needs an MFA reset"),
        ("{user} lost their phone {when} and cannot complete MFA to sign in from {site}.",),
    ),
    Issue(
        "cert-expiry",
        "security",
        "TLS certificate expired",
        (
            "Check the certificate expiry date with openssl s_client.",
            "Request a new certificate from the internal CA.",
            "Install it with the full chain.",
            "Reload the web server and add the expiry to monitoring.",
        ),
        "Confirm the certificate's expiry date with openssl, issue a new certificate from the CA, install it with the "
        "intermediate chain, reload the service and add an expiry alert.",
        False,
        ("Browser warning: certificate expired on {host}", "TLS errors on {host}"),
        (
            "Clients connecting to {host} get a certificate expired warning {when}; API calls from {site} fail the TLS "
            "handshake.",
        ),
    ),
    Issue(
        "leaked-key",
        "security",
        "Credentials leaked in a public repository",
        (
            "Revoke the leaked key immediately.",
            "Rotate every secret in the same file.",
            "Review access logs for use of the key.",
            "Escalate to the security on-call.",
        ),
        "Disable the leaked key right away and revoke it, replace all other secrets stored alongside it in that file, "
        "review the access logs for any activity with the key and escalate to the security on-call as a P1 incident.",
        True,
        ("API key pushed to public GitHub", "Secret found in a public repo"),
        ("A scanner found an access key for {host} in a public repository {when}. The commit came from {user}.",),
    ),
    Issue(
        "lockout",
        "security",
        "Account locked out repeatedly",
        (
            "Find the lockout source in the domain controller logs.",
            "Check for stale credentials on mobile devices and mapped drives.",
            "Unlock the account.",
            "Have the user update the saved password.",
        ),
        "Trace where the lockouts come from in the domain controller logs, remove old cached credentials from the "
        "user's phone and any mapped drives, unlock the account and ask the user to update the password saved on each "
        "device.",
        False,
        ("{user} locked out every morning", "Account keeps locking"),
        (
            "{user}'s account locks out {when}, even right after an unlock. They work from {site} and use a phone for "
            "mail.",
        ),
    ),
    # ------------------------------------------------------------------------------------------------------ cloud
    Issue(
        "s3-denied",
        "cloud",
        "Access denied on an object storage bucket",
        (
            "Check the bucket policy and the role's IAM policy.",
            "Look for an explicit deny or a missing KMS permission.",
            "Use the policy simulator.",
            "Grant least-privilege access to the role.",
        ),
        "Review the bucket and the role's IAM policies, find any explicit deny or missing KMS decrypt permission, "
        "test with the policy simulator and grant the role least-privilege access.",
        False,
        ("AccessDenied on bucket from {host}", "Job cannot read the storage bucket"),
        ("The nightly export on {host} fails with AccessDenied when reading the bucket {when}.",),
    ),
    Issue(
        "crashloop",
        "cloud",
        "Kubernetes pod in CrashLoopBackOff",
        (
            "Read the pod logs with kubectl logs --previous.",
            "Describe the pod for OOMKilled or failed probes.",
            "Fix the config or raise the memory limit.",
            "Roll back the deployment if the new release is faulty.",
        ),
        "Read the pod's previous logs with kubectl, describe the pod to see whether it was OOMKilled, raise the memory "
        "limit or fix the bad config, and roll back the faulty release.",
        False,
        ("Pods crashlooping on {host}", "Service down: CrashLoopBackOff"),
        ("The payments pods on {host} are in CrashLoopBackOff {when}; the deployment was updated yesterday.",),
    ),
    Issue(
        "autoscale",
        "cloud",
        "Autoscaling group does not scale out",
        (
            "Check the scaling policy and the alarm thresholds.",
            "Verify the max capacity is not reached.",
            "Check the instance quota for the region.",
            "Request a quota increase if needed.",
        ),
        "Check the scaling alarm and policy, raise the group's max capacity if it is reached, check the regional "
        "instance quota and request a quota increase if it is exhausted.",
        False,
        ("App slow, no new instances launched", "Autoscaling stuck at max"),
        ("Under load {when} the web tier stays at the same instance count and latency climbs; {host} is at 95% CPU.",),
    ),
    Issue(
        "cost-spike",
        "cloud",
        "Unexpected cloud cost spike",
        (
            "Open the cost explorer grouped by service and tag.",
            "Find idle or oversized resources.",
            "Stop untagged resources after owner confirmation.",
            "Set a budget alert.",
        ),
        "Break the bill down by service and tag in the cost explorer, identify the idle or oversized resources, stop "
        "the untagged resources once their owner approves and add a budget alert.",
        False,
        ("Cloud bill doubled this month", "Cost alert for the {site} account"),
        ("Finance flagged that the cloud bill doubled {when}; nobody knows what {host} and its GPUs are doing.",),
    ),
    Issue(
        "region-outage",
        "cloud",
        "Cloud region outage",
        (
            "Check the provider status page.",
            "Fail over to the secondary region with the DR runbook.",
            "Communicate to stakeholders.",
            "Escalate to the cloud on-call.",
        ),
        "Confirm the regional outage on the provider status page, fail over to the secondary region following the "
        "DR runbook, communicate the outage to stakeholders and escalate to the cloud on-call.",
        True,
        ("All services in the primary region down", "Region-wide outage affecting {host}"),
        (
            "Every service in our primary region, including {host}, returns 503 {when}. Customers in {site} cannot "
            "log in.",
        ),
    ),
    Issue(
        "disk-snapshot",
        "cloud",
        "Volume snapshot backup failed",
        (
            "Check the snapshot job error.",
            "Verify the snapshot quota and the IAM role of the backup job.",
            "Re-run the snapshot manually.",
            "Confirm the retention policy.",
        ),
        "Read the failed snapshot job's error, fix the backup role or snapshot quota, trigger the snapshot again "
        "manually and review the retention policy.",
        False,
        ("Snapshot backup failed for {host}", "Backup job error on volumes"),
        ("The volume snapshot for {host} failed {when} with a permissions error.",),
    ),
    # --------------------------------------------------------------------------------------------- infrastructure
    Issue(
        "disk-full",
        "infrastructure",
        "Filesystem full on a server",
        (
            "Find large files with du -sh and ncdu.",
            "Rotate and compress logs.",
            "Clear old packages and temp files.",
            "Extend the volume if usage keeps growing.",
        ),
        "Find the large files with du or ncdu, rotate and compress the logs, remove old packages and temp files, and "
        "extend the volume if usage keeps growing.",
        False,
        ("Disk full on {host}", "No space left on device on {host}"),
        ("Applications on {host} fail with 'No space left on device' {when}; the /var partition is at 100%.",),
    ),
    Issue(
        "raid-degraded",
        "infrastructure",
        "RAID array degraded",
        (
            "Check the controller for the failed disk.",
            "Do not reboot the server.",
            "Order a replacement disk under the warranty.",
            "Escalate to the data-centre on-call for the swap.",
        ),
        "Identify the failed disk on the RAID controller, keep the server running (no reboot), get a replacement drive "
        "ordered under warranty and escalate to the data-centre on-call to swap it.",
        True,
        ("RAID degraded alert on {host}", "Disk failure warning on {host}"),
        ("The RAID controller of {host} in {site} reports a degraded array {when}; one disk shows as failed.",),
    ),
    Issue(
        "ntp-drift",
        "infrastructure",
        "Server clock drift",
        (
            "Check the offset with chronyc tracking.",
            "Verify the NTP servers are reachable on UDP 123.",
            "Restart chronyd.",
            "Force a step with chronyc makestep.",
        ),
        "Measure the offset with chronyc tracking, make sure UDP 123 reaches the NTP servers, restart chronyd and "
        "step the clock with chronyc makestep.",
        False,
        ("Clock wrong on {host}", "Kerberos errors due to time skew"),
        ("{host} is five minutes ahead {when}; Kerberos logins from {site} fail with clock skew errors.",),
    ),
    Issue(
        "memory-leak",
        "infrastructure",
        "Service memory keeps growing",
        (
            "Graph the process RSS over time.",
            "Capture a heap dump.",
            "Restart the service in a maintenance window as a stop-gap.",
            "Open a bug with the service owners.",
        ),
        "Confirm the leak from the RSS graph, take a heap dump, restart the service in a maintenance window as a "
        "stop-gap and file a bug with its owners.",
        False,
        ("{host} memory usage climbing", "Service on {host} gets OOM killed"),
        ("The API service on {host} grows by 1 GB per hour {when} until the OOM killer ends it.",),
    ),
    Issue(
        "backup-fail",
        "infrastructure",
        "Nightly backup job failed",
        (
            "Read the backup agent log.",
            "Check the agent can reach the backup target.",
            "Check free space on the target.",
            "Re-run the job and verify a test restore.",
        ),
        "Read the backup agent's log, fix the agent's connection to the backup target, free up space on the target, "
        "re-run the job and check that a test restore works.",
        False,
        ("Backup failed last night on {host}", "Backup job error for {host}"),
        ("The nightly backup of {host} failed {when} with a timeout talking to the target in {site}.",),
    ),
    Issue(
        "ups-fail",
        "infrastructure",
        "UPS on battery or failed",
        (
            "Check the UPS status page.",
            "Verify the generator is running.",
            "Shut down non-critical loads.",
            "Escalate to facilities and the data-centre on-call.",
        ),
        "Check the UPS status, make sure the generator is running, shed non-critical loads and escalate to "
        "facilities and the data-centre on-call immediately.",
        True,
        ("UPS alarm in the {site} server room", "Server room on battery power"),
        ("The UPS in {site} switched to battery {when} and reports 12 minutes of runtime left; {host} is on it.",),
    ),
)
