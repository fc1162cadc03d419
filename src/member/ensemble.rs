//! One member of an ensemble, wired up (ZooKeeper's QuorumPeerMain / QuorumPeer): the
//! Zab store in dataDir ([`ZabStore`]), the replica that joins the Zab core to the
//! state machine ([`Replica`]), the peer sockets ([`PeerNet`]), the storage thread
//! ([`zab_persist`]), the client ports and the admin endpoints, and the core task that
//! owns the replica and executes its effects.
//!
//! Ordering (the rules of [`crate::zab`]): effects run in the order returned; an
//! acceptedEpoch, currentEpoch, TRUNC or SNAP write is waited for before the next effect
//! runs; appends are handed to the storage thread, which group-commits them and
//! publishes the durable zxid, fed back as [`Replica::durable`].

use super::core::{handle, route, ClientSink};
use super::dynamic_config;
use super::now_ms;
use crate::admin::core_handle::{CoreCall, CoreHandle};
use crate::admin::quorum::{ElectionView, EnsembleView, LearnerView};
use crate::config::Config;
use crate::member::replica::{Effect, ProposedAt, Replica};
use crate::net::busy_poll::BusyPoll;
use crate::net::client::{self, ClientParams, ClientPorts, ToCore};
use crate::net::peer::tls::PeerTls;
use crate::net::peer::{PeerInbox, PeerNet, PeerParams};
use crate::net::persist;
use crate::net::zab_persist::{self, ZabOp};
use crate::server::{Input, Outbound, Server};
use crate::storage::zab::ZabStore;
use crate::zab::message::{Message, ServerState};
use crate::zab::quorum::QuorumVerifier;
use crate::zab::wire::config::ServerLine;
use crate::zab::{self, Action, Sid, Zxid};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

/// Capacity of the channel into the core task (back-pressure on the connections).
const CORE_QUEUE: usize = 8192;
/// Admin calls waiting for the core task.
const ADMIN_QUEUE: usize = 64;
/// Operations queued for the storage thread; a full queue makes the core wait.
const STORAGE_QUEUE: usize = 65536;
/// Answers of the storage thread's DIFF reads waiting for the core.
const STORAGE_EVENTS: usize = 64;
/// Peer messages whose handling in one turn takes this long are logged, ms: the core serves
/// nothing meanwhile, and a learner or follower waits syncLimit ticks at most.
const SLOW_STEP_MS: u64 = 200;
/// Peer inputs taken in one turn of the core's loop at most, so that client requests,
/// the durable zxid and ticks still get their turns under a flood of peer messages.
const PEER_BATCH: usize = 256;

/// Snapshot chunks handed to the storage thread and not yet written (as standalone).
const SNAPSHOT_CHUNKS_IN_FLIGHT: usize = 2;
/// The tick while LOOKING, ms (the usual one is tickTime / 2, at most 100 ms).
const ELECTION_TICK_MS: u64 = 5;

/// The Zab core's settings from zoo.cfg: this member's id, the participants and
/// observers of the server.N lines at their config version (the dynamic config file's
/// name), tickTime, initLimit, syncLimit and reconfigEnabled.
///
/// Errors: `my_id` has no server.N line (ZooKeeper: "myid N not in the peer list").
pub fn zab_config(config: &Config, my_id: Sid) -> Result<zab::Config, String> {
    if !config.servers.iter().any(|s| s.id == my_id) {
        let ids: Vec<String> = config.servers.iter().map(|s| s.id.to_string()).collect();
        return Err(format!(
            "myid {my_id} has no server.{my_id} line in zoo.cfg (servers: {})",
            ids.join(", ")
        ));
    }
    let lines = config.servers.iter().map(ServerLine::from);
    let mut zab = zab::Config::new(
        my_id,
        QuorumVerifier::from_servers(lines, config.config_version)?,
        u64::from(config.tick_time_ms),
        u64::from(config.init_limit),
        u64::from(config.sync_limit),
    );
    zab.reconfig_enabled = config.reconfig_enabled;
    zab.storage_acks = config.storage_acks;
    Ok(zab)
}

/// Whether `effect` is of the broadcast's steady state (a client reply, a log append,
/// a PROPOSAL, ACK, COMMIT, INFORM, PING, REQUEST or REVALIDATE), after which the core
/// may take the next queued peer input before executing it. Any other (a connection
/// opened or closed, an epoch or a TRUNC or SNAP to persist, a sync message, a config
/// change, a halt) is executed before the next peer input is admitted, as when the core
/// took one input per turn: the inbox drops what a closed connection still had queued
/// only once the close has run.
fn is_plain(effect: &Effect) -> bool {
    match effect {
        Effect::Client { .. } | Effect::Storage(_) => true,
        Effect::Zab(Action::AppendTxns { .. }) => true,
        Effect::Zab(Action::Send { msg, .. }) => msg.is_steady(),
        _ => false,
    }
}

/// Txns from `from` to `to` in one epoch's numbering (0 when `from` is at or past
/// `to`); `None` across epochs, where a zxid difference counts no txns.
fn zxid_distance(from: Zxid, to: Zxid) -> Option<u64> {
    if from >= to {
        Some(0)
    } else if from >> 32 == to >> 32 {
        Some(to - from)
    } else {
        None
    }
}

/// The peer runtime's settings from zoo.cfg.
///
/// Errors: a bad `ssl.quorum.*` setting or store, with `sslQuorum` or
/// `portUnification` on.
fn peer_params(config: &Config) -> std::io::Result<PeerParams> {
    let tls = PeerTls::from_config(config).map_err(std::io::Error::other)?;
    // Both JAAS sections are read whenever quorum SASL is on (SaslQuorumAuthServer and
    // SaslQuorumAuthLearner are both built then): a missing one stops start-up.
    let sasl = if config.quorum_sasl.enabled {
        let empty = crate::sasl::jaas::JaasConfig::default();
        let jaas = config.jaas.as_ref().unwrap_or(&empty);
        let q = crate::sasl::quorum::QuorumSasl::from_jaas(config.quorum_sasl.clone(), jaas)
            .map_err(|e| std::io::Error::other(format!("quorum.auth.enableSasl: {e}")))?;
        Some(std::sync::Arc::new(q))
    } else {
        None
    };
    // The Kerberos logins of the quorum sections, once (ZooKeeper's Login at start-up).
    let kerberos = match &sasl {
        Some(q) if q.learner_kerberos.is_some() || q.server_kerberos.is_some() => {
            let login_failed = |section: &str, e: String| {
                std::io::Error::other(format!(
                    "quorum.auth.enableSasl: Kerberos login of JAAS section '{section}' failed: {e}"
                ))
            };
            let initiator = q
                .learner_kerberos
                .as_ref()
                .map(crate::net::gss::Initiator::acquire)
                .transpose()
                .map_err(|e| login_failed(&q.settings.learner_context, e))?;
            let acceptor = q
                .server_kerberos
                .as_ref()
                .map(crate::net::gss::Acceptor::acquire)
                .transpose()
                .map_err(|e| login_failed(&q.settings.server_context, e))?;
            Some(std::sync::Arc::new(crate::net::gss::QuorumKerberos {
                initiator,
                acceptor,
            }))
        }
        _ => None,
    };
    Ok(PeerParams {
        cnx_timeout: Duration::from_millis(u64::from(config.cnx_timeout_ms)),
        quorum_connect_timeout: Duration::from_millis(
            u64::from(config.tick_time_ms) * u64::from(config.init_limit.max(1)),
        ),
        quorum_listen_on_all_ips: config.quorum_listen_on_all_ips,
        jute_max_buffer: config.jute_max_buffer,
        // Only a reconfig adds servers; with a static config an unlisted sid is noise.
        unlisted_links: if config.reconfig_enabled {
            PeerParams::default().unlisted_links
        } else {
            0
        },
        tls,
        sasl,
        kerberos,
        ..PeerParams::default()
    })
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Refuses to start on a txn log whose txns after the snapshot skip a zxid
/// ([`zab::log::first_hole`]): the store is damaged, and serving on would commit the
/// txns around the hole without those in it, here and, leading, on every learner synced
/// from this log. The txns are kept as they are (the store's open before this check
/// may only finish its own housekeeping); the operator empties the member's store,
/// while the other members serve, and it rejoins by SNAP.
///
/// Errors: the hole, with the zxids around it and the directories to empty.
fn refuse_a_hole(config: &Config, recovered: &zab::Recovered) -> std::io::Result<()> {
    let Some((before, after)) = zab::log::first_hole(recovered.snapshot_zxid, &recovered.log)
    else {
        return Ok(());
    };
    let snapshot = match recovered.snapshot_zxid {
        0 => "no snapshot".to_owned(),
        z => format!("the snapshot is at 0x{z:x}"),
    };
    let (data, log) = (&config.data_dir, &config.data_log_dir);
    let empty = if data == log {
        format!("dataDir {} (all but myid)", data.display())
    } else {
        format!(
            "dataDir {} (all but myid) and dataLogDir {}",
            data.display(),
            log.display()
        )
    };
    Err(io_err(format!(
        "the txn log in {} skips from zxid 0x{before:x} to 0x{after:x} ({snapshot}; the txns \
         after it must follow one another): this member's store is damaged, or was written \
         by a keel older than 6170501; while the other members serve, empty {empty} and \
         the member rejoins by SNAP",
        log.display(),
    )))
}

/// Converts the dataDir a ZooKeeper member left (its snapshots, logs and epochs) into
/// this member's store in place ([`crate::import::ensemble::convert`]), so it rejoins
/// by DIFF. ZooKeeper's files are only read.
///
/// Errors: the conversion's refusal (a damaged dataDir is never rewritten).
fn convert_in_place(config: &Config) -> std::io::Result<()> {
    let opts = crate::import::Options {
        zk_data_dir: config.data_dir.clone(),
        zk_log_dir: (config.data_log_dir != config.data_dir).then(|| config.data_log_dir.clone()),
        keel_data_dir: config.data_dir.clone(),
        keel_log_dir: Some(config.data_log_dir.clone()),
        jute_maxbuffer: config.jute_max_buffer,
        check_digests: false,
    };
    let c = crate::import::ensemble::convert(&opts, &mut |line| tracing::debug!("{line}"))
        .map_err(|e| io_err(format!("converting ZooKeeper's dataDir: {e}")))?;
    for w in &c.warnings {
        tracing::warn!("converting ZooKeeper's dataDir: {w}");
    }
    tracing::info!(
        snapshot = %c.snapshot.display(),
        snapshot_zxid = format!("0x{:x}", c.snapshot_zxid),
        last_zxid = format!("0x{:x}", c.last_zxid),
        znodes = c.znodes,
        sessions = c.sessions,
        logged_txns = c.logged_txns,
        log_files = c.log_files,
        "converted ZooKeeper's dataDir in place into this member's store"
    );
    Ok(())
}

/// Runs this member of the ensemble `config` describes until `shutdown` resolves.
///
/// Errors: no myid or no server.N line for it; a port (client, election, quorum,
/// admin) cannot be bound; a TLS setting is bad; the store is refused.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let my_id = config
        .my_id
        .ok_or_else(|| io_err("an ensemble member needs dataDir/myid"))?;
    let zab_config = zab_config(&config, my_id).map_err(io_err)?;
    let config = Arc::new(config);
    let tls = client::tls_acceptor(&config)?;
    let peer_params = peer_params(&config)?;
    let admin = crate::admin::Endpoints::bind(&config).await?;
    if let (Some(file), true, None) = (
        &config.config_file,
        config.reconfig_enabled,
        &config.dynamic_config_file,
    ) {
        dynamic_config::back_up_static(file)?;
    }
    let t0 = std::time::Instant::now();
    if crate::import::ensemble::needs_conversion(&config.data_dir) {
        convert_in_place(&config)?;
    }
    let store = ZabStore::open(&config.data_dir, &config.data_log_dir, config.force_sync)
        .map_err(io_err)?;
    let recovered = store.try_recover().map_err(io_err)?;
    refuse_a_hole(&config, &recovered)?;
    let (_, snapshot) = store.try_snapshot().map_err(io_err)?;
    let durable = recovered
        .log
        .last()
        .map_or(recovered.snapshot_zxid, |t| t.zxid);
    tracing::info!(
        my_id,
        accepted_epoch = recovered.accepted_epoch,
        current_epoch = recovered.current_epoch,
        snapshot_zxid = format!("0x{:x}", recovered.snapshot_zxid),
        logged_txns = recovered.log.len(),
        last_zxid = format!("0x{durable:x}"),
        elapsed_ms = t0.elapsed().as_millis() as u64,
        "recovered the member's store"
    );
    let now = now_ms() as u64;
    let (mut replica, first) = Replica::new(
        zab_config,
        crate::server_settings(&config),
        recovered,
        &snapshot,
        config.membership().into_bytes().into(),
        now,
        now ^ (u64::from(std::process::id()) << 32),
    )
    .map_err(io_err)?;
    if config.read_only_mode_enabled {
        replica.enable_read_only_mode(u64::from(config.tick_time_ms));
    }
    replica.set_standalone_enabled(config.standalone_enabled);
    drop(snapshot);
    let ports = ClientPorts::bind(&config, tls).await?;
    let (peers, inbox) = PeerNet::start(my_id, &config.servers, peer_params).await?;
    tracing::info!(
        my_id,
        servers = config.servers.len(),
        "election and quorum ports bound; looking for a leader"
    );
    let (storage_tx, storage_rx) = mpsc::channel(STORAGE_QUEUE);
    let (events_tx, events_rx) = mpsc::channel(STORAGE_EVENTS);
    let (durable_tx, durable_rx) = watch::channel::<Zxid>(durable);
    let storage_stats = replica.server().stats.metrics.storage.clone();
    let chunk_slots = Arc::new(Semaphore::new(SNAPSHOT_CHUNKS_IN_FLIGHT));
    let written_slots = chunk_slots.clone();
    let (busy_poll, _busy_poll_thread) = BusyPoll::start(config.busy_poll_us())?;
    let purge = persist::Purge {
        retain: config.autopurge_snap_retain_count as usize,
        interval_hours: config.autopurge_purge_interval_hours,
    };
    let storage_thread = std::thread::Builder::new()
        .name("keel-storage".into())
        .spawn(move || {
            zab_persist::run(
                store,
                storage_rx,
                durable_tx,
                events_tx,
                storage_stats,
                &written_slots,
                purge,
            )
        })?;
    let (core_tx, core_rx) = mpsc::channel(CORE_QUEUE);
    let (admin_tx, admin_rx) = mpsc::channel(ADMIN_QUEUE);
    let (client_move, client_moves) = watch::channel(None);
    let mut core = EnsembleCore {
        replica,
        routes: rustc_hash::FxHashMap::default(),
        peers,
        storage: storage_tx,
        pending: first,
        config_file: config.config_file.clone(),
        own_client: None,
        client_move,
    };
    // A last seen config recovered from the log may name members zoo.cfg does not.
    core.follow_members().await;
    let core_config = config.clone();
    let core_task = tokio::spawn(async move {
        core.run(
            core_rx,
            admin_rx,
            inbox,
            events_rx,
            durable_rx,
            chunk_slots,
            core_config,
        )
        .await
    });
    admin.serve(CoreHandle::new(admin_tx));
    let params = ClientParams {
        max_buffer: config.jute_max_buffer,
        max_client_cnxns: config.max_client_cnxns,
        is_four_letter_word: crate::admin::fourlw::is_four_letter_word,
        x509_super_user: config.x509_super_user.clone(),
        busy_poll,
        gssapi: crate::net::gss::Acceptor::for_config(&config)?,
        ensemble: true,
    };
    ports
        .serve(core_tx, params, Some(client_moves), shutdown)
        .await;
    tracing::info!("shutting down");
    core_task.abort();
    let _ = core_task.await;
    let _ = tokio::task::spawn_blocking(move || storage_thread.join()).await;
    Ok(())
}

/// The ensemble member's core task state: the replica and where its effects go.
struct EnsembleCore {
    replica: Replica,
    routes: rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>>,
    peers: PeerNet,
    storage: mpsc::Sender<ZabOp>,
    /// Effects returned and not yet executed.
    pending: Vec<Effect>,
    /// The zoo.cfg the member started from, after which the dynamic config files are
    /// named ([`dynamic_config`]); `None` when started without one (tests).
    config_file: Option<std::path::PathBuf>,
    /// The client address this member's line in the current config gave when the
    /// members were last followed (`None` before the first time, or without one).
    own_client: Option<Option<(String, u16)>>,
    /// Tells the client listener to move when a new config moves that address.
    client_move: watch::Sender<Option<(String, u16)>>,
}

impl EnsembleCore {
    /// Queues `effects` behind those pending and hands their vector back to the
    /// replica ([`Replica::recycle`]): a vector of effects per peer message, allocated
    /// and freed, was a good part of the allocations per write.
    fn absorb(&mut self, mut effects: Vec<Effect>) {
        if self.pending.is_empty() {
            std::mem::swap(&mut self.pending, &mut effects);
        } else {
            self.pending.append(&mut effects);
        }
        self.replica.recycle(effects);
    }
}

impl ClientSink for EnsembleCore {
    fn input(&mut self, now_ms: i64, input: Input) {
        let effects = self.replica.client(now_ms as u64, input);
        self.absorb(effects);
    }
    fn server_mut(&mut self) -> &mut Server {
        self.replica.server_mut()
    }
    fn ensemble_view(&self) -> Option<EnsembleView> {
        Some(self.view())
    }
}

impl EnsembleCore {
    /// The replica's Zab side as the admin surface shows it.
    fn view(&self) -> EnsembleView {
        let peer = self.replica.peer();
        let zab_state = peer.zab_state().name().to_lowercase();
        let state = match peer.state() {
            ServerState::Looking => "looking",
            ServerState::Following => "following",
            ServerState::Leading => "leading",
            ServerState::Observing => "observing",
        };
        let (accepted_epoch, current_epoch) = peer.epochs();
        let syncs = self.replica.sync_counts();
        let proposals = self.replica.proposal_stats();
        let now = now_ms() as u64;
        let last = peer.last_logged();
        let (last_election, looking_since_ms) = self.replica.elections();
        EnsembleView {
            my_id: peer.sid(),
            peer_state: format!("{state} - {zab_state}"),
            zab_state,
            leader_id: peer.leader(),
            accepted_epoch,
            current_epoch,
            last_logged_zxid: peer.last_logged() as i64,
            config_text: String::from_utf8_lossy(self.replica.membership()).into_owned(),
            learners: peer
                .learners()
                .into_iter()
                .map(|l| {
                    // An observer never ACKs; a participant's lag is from its ACKs.
                    let lag_known = !l.observer && l.forwarding;
                    let lag_txns = lag_known.then(|| zxid_distance(l.acked, last)).flatten();
                    let (lag_ms, lag_ms_at_least) = match self.replica.proposed_at(l.acked) {
                        _ if !lag_known => (None, false),
                        ProposedAt::CaughtUp => (Some(0), false),
                        ProposedAt::At(t) => (Some(now.saturating_sub(t)), false),
                        ProposedAt::Before(t) => (Some(now.saturating_sub(t)), true),
                    };
                    LearnerView {
                        sid: l.sid,
                        observer: l.observer,
                        voting: peer.quorum_config().participants().any(|p| p == l.sid),
                        synced: l.forwarding,
                        acked_zxid: l.acked as i64,
                        lag_txns,
                        lag_ms,
                        lag_ms_at_least,
                        last_heard_ms_ago: now.saturating_sub(l.last_heard_ms),
                        connected_at_ms: l.connected_ms,
                        link: self.peers.quorum_link(l.sid),
                    }
                })
                .collect(),
            leader_uptime_ms: peer
                .leading_since_ms()
                .map(|since| now.saturating_sub(since)),
            diff_count: syncs.diff + syncs.trunc,
            snap_count: syncs.snap,
            proposal_count: proposals.count,
            proposal_sizes: proposals.sizes(peer.leading_since_ms()),
            voting_members: peer.quorum_config().participants().count() as u64,
            role_metrics: self.replica.role_metrics().clone(),
            last_election: last_election.map(|e| ElectionView {
                started_ms: e.started_ms,
                ended_ms: e.ended_ms,
                leader: e.leader,
                vote: e.vote.map(|(z, epoch)| (z as i64, epoch)),
            }),
            looking_since_ms,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        &mut self,
        mut rx: mpsc::Receiver<ToCore>,
        mut admin_rx: mpsc::Receiver<CoreCall>,
        mut inbox: PeerInbox,
        mut events: mpsc::Receiver<zab::Input>,
        mut durable: watch::Receiver<Zxid>,
        chunk_slots: Arc<Semaphore>,
        config: Arc<Config>,
    ) {
        // Zab wants a tick at least every tickTime / 2; the state machine's expiry
        // and reaping are checked on the same beat.
        let tick_ms = (u64::from(config.tick_time_ms) / 2).clamp(1, 100);
        let mut tick = tokio::time::interval(Duration::from_millis(tick_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // While LOOKING, the election's deadlines (the finalize wait's end, re-sends)
        // are met within ELECTION_TICK_MS rather than a whole tick late: every ms of
        // an election is a ms without writes.
        let mut election_tick = tokio::time::interval(Duration::from_millis(ELECTION_TICK_MS));
        election_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut routes = std::mem::take(&mut self.routes);
        loop {
            if !self.execute(&mut routes).await {
                return;
            }
            let snapshotting = self.replica.server().snapshot_in_progress();
            let snap_sending = self.replica.snap_sending();
            let looking = self.replica.peer().state() == ServerState::Looking;
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { return };
                    handle(self, &mut routes, &config, msg);
                    for _ in 0..1024 {
                        match rx.try_recv() {
                            Ok(msg) => handle(self, &mut routes, &config, msg),
                            Err(_) => break,
                        }
                    }
                }
                Some(call) = admin_rx.recv() => {
                    let view = self.view();
                    call.run(self.replica.server_mut(), &config, Some(&view));
                }
                input = inbox.recv() => {
                    // What is queued behind it is taken in the same turn (one execution
                    // of the effects): a leader gets an ACK per zxid from each
                    // follower, a follower a PROPOSAL and a COMMIT. Each input gets
                    // its own time, which also times the one before it.
                    let mut now = now_ms() as u64;
                    let (mut kind, mut plain) = self.peer_input(now, input);
                    let mut taken = 1;
                    let mut slowest = (0, kind);
                    loop {
                        let next = (taken < PEER_BATCH && plain).then(|| inbox.try_recv()).flatten();
                        let then = now_ms() as u64;
                        if then.saturating_sub(now) > slowest.0 {
                            slowest = (then - now, kind);
                        }
                        now = then;
                        let Some(input) = next else { break };
                        (kind, plain) = self.peer_input(now, input);
                        taken += 1;
                    }
                    if slowest.0 >= SLOW_STEP_MS {
                        tracing::info!(kind = slowest.1, busy_ms = slowest.0, messages = taken, "a peer message kept the core busy");
                    }
                }
                Some(event) = events.recv() => {
                    if let zab::Input::LogRead { peer, after, txns } = event {
                        tracing::debug!(peer, after = format!("0x{after:x}"), txns = txns.as_ref().map(|t| t.len()), last = txns.as_ref().and_then(|t| t.last()).map(|t| format!("0x{:x}", t.zxid)), "log read for a DIFF done");
                        let effects = self.replica.log_read(now_ms() as u64, peer, after, txns);
                        self.absorb(effects);
                    }
                }
                changed = durable.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let zxid = *durable.borrow_and_update();
                    let effects = self.replica.durable(now_ms() as u64, zxid);
                    self.absorb(effects);
                }
                _ = tick.tick() => {
                    let effects = self.replica.tick(now_ms() as u64);
                    self.absorb(effects);
                }
                _ = election_tick.tick(), if looking => {
                    let effects = self.replica.tick(now_ms() as u64);
                    self.absorb(effects);
                }
                // A SNAP to a learner, a step at a time between the other inputs (the
                // select picks among the ready branches at random). Always ready, so
                // the task yields after each step: else it would never give its
                // worker thread back, and the connections' tasks queued behind it
                // would bring no request until the whole SNAP was written.
                _ = std::future::ready(()), if snap_sending => {
                    let effects = self.replica.snap_step(now_ms() as u64);
                    self.absorb(effects);
                    tokio::task::yield_now().await;
                }
                slot = chunk_slots.acquire(), if snapshotting => {
                    if let Ok(slot) = slot {
                        slot.forget();
                        let effects = self.replica.snapshot_step(now_ms() as u64);
                        self.absorb(effects);
                    }
                }
            }
        }
    }

    /// Feeds one input of the peer inbox to the replica at `now` (ms) and queues its
    /// effects; returns the message's packet type (0 for a disconnection) and whether
    /// all its effects are plain ([`is_plain`]).
    fn peer_input(&mut self, now: u64, input: zab::Input) -> (i32, bool) {
        let (kind, effects) = match input {
            zab::Input::Message {
                from,
                msg: msg @ Message::Snap { .. },
            } => {
                // The SNAP's parts, for the catch-up figures (issue 16): the stream as
                // it arrived, then its reading into the tree (the "installing" line
                // follows when that is done).
                let bytes = match &msg {
                    Message::Snap { zxid, snapshot } => {
                        // Written to storage on the storage thread while this one reads
                        // it into the tree: the install that follows only commits
                        // (0.1-0.15 s of a 1,000,000-znode SNAP off the catch-up). Only
                        // from the leader this member follows; should the core answer
                        // it otherwise (a TRUNC), storage gives the staged file up. A
                        // full queue only means the install writes it whole, and so
                        // does a periodic snapshot's write queued before it.
                        let from_leader = self.replica.peer().leader() == Some(from);
                        let stage = ZabOp::Stage {
                            zxid: *zxid,
                            snapshot: snapshot.clone(),
                        };
                        if from_leader && self.storage.try_send(stage).is_err() {
                            tracing::debug!("storage queue full: the SNAP is not staged");
                        }
                        snapshot.len()
                    }
                    _ => 0,
                };
                tracing::info!(from, bytes, "the leader's SNAP stream is in; reading it");
                let kind = msg.packet_type().unwrap_or(0);
                let read = std::time::Instant::now();
                let effects = self.replica.message(now, from, msg);
                tracing::info!(
                    elapsed_ms = read.elapsed().as_millis() as u64,
                    "the leader's SNAP stream read into the tree"
                );
                (kind, effects)
            }
            zab::Input::Message { from, msg } => {
                let kind = msg.packet_type().unwrap_or(0);
                if !msg.is_steady() {
                    tracing::debug!(from, kind, "peer message");
                }
                (kind, self.replica.message(now, from, msg))
            }
            zab::Input::Disconnected { peer } => (0, self.replica.disconnected(now, peer)),
            other => {
                tracing::error!(?other, "the peer inbox gave an input it never should");
                (0, Vec::new())
            }
        };
        let plain = effects.iter().all(is_plain);
        self.absorb(effects);
        (kind, plain)
    }

    /// Executes the pending effects in order; false when the member must stop (the
    /// storage thread is gone).
    async fn execute(
        &mut self,
        routes: &mut rustc_hash::FxHashMap<u64, mpsc::Sender<Outbound>>,
    ) -> bool {
        let mut outbox: Vec<(u64, Outbound)> = Vec::new();
        // Effects may produce more effects only through the replica's inputs, which
        // come from the loop; this drains what is queued now.
        let mut effects = std::mem::take(&mut self.pending);
        for effect in effects.drain(..) {
            match effect {
                Effect::Client { conn, out } => outbox.push((conn, out)),
                Effect::Storage(op) => {
                    if self.storage.send(ZabOp::Server(op)).await.is_err() {
                        return false;
                    }
                }
                Effect::Halt { reason } => {
                    tracing::error!(
                        reason,
                        "the member's Zab core and state machine disagree; stopping so \
                         it restarts from its store"
                    );
                    std::process::exit(3);
                }
                Effect::Zab(action) => {
                    // Clients are answered in order with the storage writes: what is
                    // routed so far goes out before a write the core waits for.
                    if !self.zab_action(action).await {
                        return false;
                    }
                }
            }
        }
        self.peers.flush();
        route(routes, outbox);
        self.replica.recycle(effects);
        true
    }

    /// Points the peer network at the members of the current and the last seen
    /// config (ZooKeeper's QuorumCnxManager connects to both views), and this member's
    /// listeners at its own line in the current config (ZooKeeper moves them when it
    /// activates a config, `QuorumPeer.processReconfig`). The client port moves only
    /// when a later config changes the line's client address: at start the port is
    /// where zoo.cfg put it.
    async fn follow_members(&mut self) {
        let me = self.peers.my_sid();
        if let Some(line) = self.replica.peer().quorum_config().server(me).cloned() {
            if let Err(e) = self.peers.set_own_line(&line).await {
                tracing::error!(error = %e, "this member's new peer address does not bind; the old one stays");
            }
            let before = self.own_client.replace(line.client.clone());
            if let (Some(before), Some(to)) = (before, &line.client) {
                if before.as_ref() != Some(to) {
                    let _ = self.client_move.send(Some(to.clone()));
                }
            }
        }
        let peer = self.replica.peer();
        let mut lines: Vec<ServerLine> = peer.quorum_config().servers().cloned().collect();
        for s in peer.last_seen_config().servers() {
            match lines.iter_mut().find(|l| l.sid == s.sid) {
                Some(l) => *l = s.clone(),
                None => lines.push(s.clone()),
            }
        }
        self.peers.set_members(&lines);
    }

    /// Executes one Zab action; false when the storage thread is gone.
    async fn zab_action(&mut self, action: Action) -> bool {
        // The broadcast's messages wait in the cork until the turn's effects are
        // executed; anything else (a close, an epoch, a TRUNC, a SNAP, a config)
        // happens after what was sent before it, as the effects' order says.
        if !matches!(action, Action::Send { .. } | Action::AppendTxns { .. }) {
            self.peers.flush();
        }
        let (op, wait) = match action {
            Action::Send { to, msg } => {
                if !msg.is_steady() {
                    tracing::debug!(to, kind = msg.packet_type().unwrap_or(0), "sending");
                }
                // Only a SNAP's queueing is timed: a clock read per message is not free.
                let snap = matches!(msg, Message::Snap { .. }).then(std::time::Instant::now);
                self.peers.send_corked(to, msg);
                if let Some(started) = snap {
                    tracing::info!(
                        to,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "SNAP stream queued"
                    );
                }
                return true;
            }
            Action::CloseConnection { peer } => {
                tracing::debug!(peer, "closing the quorum connection (the core asked)");
                self.peers.close(peer);
                return true;
            }
            Action::AppendTxns { txns, ack_to } => {
                let ack = ack_to.and_then(|to| self.peers.ack_link(to));
                (ZabOp::Append { txns, ack }, None)
            }
            Action::ReadLog {
                peer,
                after,
                upto,
                snapshot_size_factor,
            } => {
                tracing::debug!(
                    peer,
                    after = format!("0x{after:x}"),
                    upto = format!("0x{upto:x}"),
                    "reading the log for a DIFF"
                );
                (
                    ZabOp::ReadLog {
                        peer,
                        after,
                        upto,
                        snapshot_size_factor,
                    },
                    None,
                )
            }
            Action::PersistAcceptedEpoch { epoch } => {
                let (done, wait) = oneshot::channel();
                (ZabOp::AcceptedEpoch { epoch, done }, Some(wait))
            }
            Action::PersistCurrentEpoch { epoch } => {
                let (done, wait) = oneshot::channel();
                (ZabOp::CurrentEpoch { epoch, done }, Some(wait))
            }
            Action::TruncateLog { after } => {
                tracing::info!(
                    after = format!("0x{after:x}"),
                    "truncating the txn log (TRUNC)"
                );
                let (done, wait) = oneshot::channel();
                (ZabOp::Truncate { after, done }, Some(wait))
            }
            Action::InstallSnapshot { zxid, snapshot } => {
                tracing::info!(
                    zxid = format!("0x{zxid:x}"),
                    bytes = snapshot.len(),
                    "installing the leader's snapshot (SNAP)"
                );
                let (done, wait) = oneshot::channel();
                (
                    ZabOp::Install {
                        zxid,
                        snapshot,
                        done,
                    },
                    Some(wait),
                )
            }
            Action::ConfigSeen { config } => {
                tracing::info!(
                    version = format!("{:x}", config.version()),
                    "a reconfig was proposed: last seen config"
                );
                if let Some(file) = &self.config_file {
                    if let Err(e) = dynamic_config::write_next(file, &config) {
                        tracing::error!(error = %e, "writing the .dynamic.next file failed");
                    }
                }
                self.follow_members().await;
                return true;
            }
            Action::ConfigActivated { config } => {
                tracing::info!(
                    version = format!("{:x}", config.version()),
                    config = config.text().replace('\n', " "),
                    "a reconfig committed: config activated"
                );
                if let Some(file) = &self.config_file {
                    let last_seen = self.replica.peer().last_seen_config().version();
                    let me = self.peers.my_sid();
                    if let Err(e) = dynamic_config::write_activated(file, &config, me, last_seen) {
                        tracing::error!(error = %e, "writing the dynamic config file failed");
                    }
                }
                self.follow_members().await;
                return true;
            }
            other => {
                tracing::error!(?other, "the replica returned an action it answers itself");
                return true;
            }
        };
        if self.storage.send(op).await.is_err() {
            return false;
        }
        match wait {
            Some(wait) => wait.await.is_ok(),
            None => true,
        }
    }
}
