use super::*;
use crate::fakes::FakeServer;

fn instance(ip: &str, v2_required: bool, user_data: Option<&str>) -> Instance {
    Instance {
        instance_id: "i-0123456789abcdef0".into(),
        availability_zone: "eu-west-1a".into(),
        region: "eu-west-1".into(),
        ami_id: "ami-0nodejoin".into(),
        private_ip: ip.parse().unwrap(),
        mac: "02:aa:bb:cc:dd:ee".into(),
        vpc: crate::fakes::vpc::Vpc::new(
            "imds-test",
            &crate::fakes::vpc::tests::network("vpcCidrs: [10.0.0.0/16, 100.64.0.0/16]"),
        ),
        user_data: user_data.map(|u| u.as_bytes().to_vec()),
        imds_v2_required: v2_required,
        put_hop_limit: DEFAULT_HOP_LIMIT,
        ..crate::fakes::instances::tests::instance()
    }
}

async fn server(v2_required: bool, user_data: Option<&str>) -> (FakeServer, reqwest::Client) {
    let instances = Instances::new();
    instances.register(instance("127.0.0.1", v2_required, user_data));
    let imds = Imds::new(instances);
    let server = FakeServer::start("imds", "127.0.0.1".parse().unwrap(), imds.router())
        .await
        .unwrap();
    (server, reqwest::Client::new())
}

async fn token(s: &FakeServer, c: &reqwest::Client, ttl: &str) -> reqwest::Response {
    c.put(format!("{}/latest/api/token", s.url()))
        .header(TTL_HEADER, ttl)
        .send()
        .await
        .unwrap()
}

/// A caller asking for tokens in a loop holds at most so many live ones (its oldest go), and never another's.
#[test]
fn a_token_storm_keeps_a_bounded_number() {
    let imds = Imds::new(Instances::new());
    let (storm, quiet): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let other = imds.issue_token(quiet, Duration::from_secs(600));
    let first = imds.issue_token(storm, Duration::from_secs(600));
    let mut last = String::new();
    for _ in 0..super::MAX_TOKENS_PER_CALLER + 50 {
        last = imds.issue_token(storm, Duration::from_secs(600));
    }
    assert_eq!(imds.token_count(), super::MAX_TOKENS_PER_CALLER + 1);
    assert!(imds.check_token(&last, storm).is_some());
    assert!(imds.check_token(&first, storm).is_none(), "the oldest went first");
    assert!(imds.check_token(&other, quiet).is_some());
}

/// Expired tokens are pruned when the next is issued, and a gone instance's tokens can be forgotten.
#[test]
fn expired_and_forgotten_tokens_are_pruned() {
    let imds = Imds::new(Instances::new());
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    imds.issue_token(a, Duration::ZERO);
    imds.issue_token(a, Duration::ZERO);
    std::thread::sleep(Duration::from_millis(5));
    let live = imds.issue_token(a, Duration::from_secs(60));
    assert_eq!(imds.token_count(), 1, "expired tokens were kept");
    assert!(imds.check_token(&live, a).is_some());
    imds.issue_token(b, Duration::from_secs(60));
    imds.forget(a);
    assert_eq!(imds.token_count(), 1);
    assert!(imds.check_token(&live, a).is_none());
}

#[tokio::test]
async fn token_ttl_rules() {
    let (s, c) = server(true, None).await;
    for bad in ["0", "21601", "abc", "-5"] {
        assert_eq!(token(&s, &c, bad).await.status(), 400, "ttl {bad}");
    }
    let missing = c.put(format!("{}/latest/api/token", s.url())).send().await.unwrap();
    assert_eq!(missing.status(), 400);
    let ok = token(&s, &c, "21600").await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()[TTL_HEADER], "21600");
    let get = c.get(format!("{}/latest/api/token", s.url())).send().await.unwrap();
    assert_eq!(get.status(), 405);
    let proxied = c
        .put(format!("{}/latest/api/token", s.url()))
        .header(TTL_HEADER, "60")
        .header("x-forwarded-for", "10.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), 403);
}

#[tokio::test]
async fn v2_required_refuses_v1_and_bad_tokens() {
    let (s, c) = server(true, None).await;
    let url = format!("{}/latest/meta-data/instance-id", s.url());
    assert_eq!(c.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        c.get(&url)
            .header(TOKEN_HEADER, "forged")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let t = token(&s, &c, "60").await.text().await.unwrap();
    let ok = c.get(&url).header(TOKEN_HEADER, &t).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().contains_key(TTL_HEADER));
    assert_eq!(ok.text().await.unwrap(), "i-0123456789abcdef0");
}

#[tokio::test]
async fn token_expires() {
    let (s, c) = server(true, None).await;
    let t = token(&s, &c, "1").await.text().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let url = format!("{}/latest/meta-data/instance-id", s.url());
    assert_eq!(c.get(&url).header(TOKEN_HEADER, &t).send().await.unwrap().status(), 401);
}

#[tokio::test]
async fn v1_allowed_when_optional() {
    let (s, c) = server(false, None).await;
    let r = c
        .get(format!("{}/latest/meta-data/instance-type", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "m5.large");
}

#[tokio::test]
async fn paths_listings_and_documents() {
    let (s, c) = server(false, Some("#!/bin/sh\necho hi\n")).await;
    let get = |p: &str| {
        let c = c.clone();
        let url = format!("{}{p}", s.url());
        async move {
            let r = c.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (st, listing) = get("/latest/meta-data/").await;
    assert_eq!(st, 200);
    for entry in [
        "instance-id",
        "placement/",
        "network/",
        "iam/",
        "mac",
        "local-ipv4",
        "services/",
    ] {
        assert!(listing.lines().any(|l| l == entry), "{entry} missing from {listing}");
    }
    assert_eq!(get("/latest/meta-data").await.1, listing);
    assert_eq!(
        get("/latest/meta-data/placement/availability-zone").await.1,
        "eu-west-1a"
    );
    assert_eq!(
        get("/latest/meta-data/local-hostname").await.1,
        "ip-127-0-0-1.eu-west-1.compute.internal"
    );
    assert_eq!(
        get("/latest/meta-data/network/interfaces/macs/").await.1,
        "02:aa:bb:cc:dd:ee/"
    );
    let (_, doc) = get("/latest/dynamic/instance-identity/document").await;
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["region"], "eu-west-1");
    assert_eq!(doc["instanceId"], "i-0123456789abcdef0");
    assert_eq!(get("/latest/meta-data/iam/security-credentials/").await.1, "NodeRole");
    let (_, creds) = get("/latest/meta-data/iam/security-credentials/NodeRole").await;
    let creds: serde_json::Value = serde_json::from_str(&creds).unwrap();
    assert!(creds["AccessKeyId"].as_str().unwrap().starts_with("ASIA"));
    assert_eq!(creds["Code"], "Success");
    assert_eq!(
        get("/latest/user-data").await,
        (200, "#!/bin/sh\necho hi\n".to_string())
    );
    assert!(get("/latest/").await.1.lines().any(|l| l == "user-data"));
    assert_eq!(get("/2021-03-23/meta-data/instance-id").await.1, "i-0123456789abcdef0");
    assert_eq!(get("/latest/meta-data/no-such-thing").await.0, 404);
    assert_eq!(get("/nonsense/meta-data/").await.0, 404);
}

/// The VPC leaves come from the scenario's network, not from the caller's address; `local-ipv4` stays the
/// caller's real address.
#[tokio::test]
async fn network_leaves_serve_the_declared_vpc() {
    let network =
        "vpcCidrs: [10.0.0.0/16, 100.64.0.0/16]\nsubnetCidr: 10.0.32.0/20\nvpcIpv6Cidrs: [\"2600:1f14:abc:de00::/56\"]";
    let vpc = crate::fakes::vpc::Vpc::new("demo", &crate::fakes::vpc::tests::network(network));
    let instances = Instances::new();
    instances.register(Instance {
        vpc: vpc.clone(),
        ..instance("127.0.0.1", false, None)
    });
    let s = FakeServer::start("imds", "127.0.0.1".parse().unwrap(), Imds::new(instances).router())
        .await
        .unwrap();
    let c = reqwest::Client::new();
    let get = |p: String| {
        let c = c.clone();
        let url = format!("{}/latest/meta-data/{p}", s.url());
        async move {
            let r = c.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let m = |leaf: &str| format!("network/interfaces/macs/02:aa:bb:cc:dd:ee/{leaf}");
    for (leaf, want) in [
        ("vpc-ipv4-cidr-block", "10.0.0.0/16".to_string()),
        ("vpc-ipv4-cidr-blocks", "10.0.0.0/16\n100.64.0.0/16".to_string()),
        ("subnet-ipv4-cidr-block", "10.0.32.0/20".to_string()),
        ("vpc-ipv6-cidr-blocks", "2600:1f14:abc:de00::/56".to_string()),
        ("subnet-ipv6-cidr-blocks", "2600:1f14:abc:de00::/64".to_string()),
        ("vpc-id", vpc.vpc_id.clone()),
        ("subnet-id", vpc.subnet_id.clone()),
        ("local-ipv4s", "127.0.0.1".to_string()),
    ] {
        assert_eq!(get(m(leaf)).await, (200, want), "{leaf}");
    }
    assert_eq!(get(m("ipv6s")).await.0, 404, "the container holds no IPv6 address");
    assert_eq!(get("local-ipv4".into()).await.1, "127.0.0.1");
    let (_, listing) = get(m("")).await;
    for leaf in ["vpc-ipv4-cidr-blocks", "vpc-ipv6-cidr-blocks", "subnet-id", "vpc-id"] {
        assert!(listing.lines().any(|l| l == leaf), "{leaf} missing from {listing}");
    }
}

#[tokio::test]
async fn no_user_data_is_404_and_unknown_caller_is_404() {
    let instances = Instances::new();
    let registered = instances.register(instance("127.0.0.1", false, None));
    let imds = Arc::new(Imds {
        instances: instances.clone(),
        tokens: Mutex::new(HashMap::new()),
        registration_wait: Duration::from_millis(10),
    });
    let s = FakeServer::start("imds", "127.0.0.1".parse().unwrap(), imds.router())
        .await
        .unwrap();
    let c = reqwest::Client::new();
    assert_eq!(
        c.get(format!("{}/latest/user-data", s.url()))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    instances.remove(&registered);
    assert_eq!(
        c.get(format!("{}/latest/meta-data/", s.url()))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let log = instances.requests_from("127.0.0.1".parse().unwrap());
    assert_eq!(log.len(), 2);
    assert!(log[1].note.contains("no instance"));
}
