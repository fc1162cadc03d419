import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;

/**
 * The stock Java client's multi and multiRead (issue 14 items 4 and 5): prints every
 * result of zk.multi(...) with read ops (sent as multiRead) and with creates of every
 * create mode (CONTAINER and TTL included), in a form where two servers' outputs
 * compare line by line: zxids relative to the first create of the run, times and the
 * session id masked. run.sh runs it against real ZooKeeper and keel and diffs.
 *
 * Usage: java MultiCheck HOST:PORT
 */
public class MultiCheck {
    static ZooKeeper zk;
    static long base;
    static final String ROOT = "/javaclient";

    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        zk = new ZooKeeper(args[0], 30000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(20, TimeUnit.SECONDS)) {
            System.out.println("no connection");
            System.exit(2);
        }
        Stat rootStat = new Stat();
        zk.create(ROOT, "r".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, rootStat);
        base = rootStat.getCzxid();
        zk.create(ROOT + "/a", "A".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(ROOT + "/b", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        // Nobody may read it: a NOAUTH inside the multiRead.
        zk.create(ROOT + "/secret", "s".getBytes(),
            Arrays.asList(new ACL(ZooDefs.Perms.WRITE, ZooDefs.Ids.ANYONE_ID_UNSAFE)),
            CreateMode.PERSISTENT);

        run("multiRead: children and data", Arrays.asList(
            Op.getChildren(ROOT), Op.getData(ROOT + "/a"), Op.getData(ROOT + "/b"),
            Op.getChildren(ROOT + "/a")));
        run("multiRead: errors inside", Arrays.asList(
            Op.getData(ROOT + "/missing"), Op.getChildren(ROOT), Op.getChildren(ROOT + "/missing"),
            Op.getData(ROOT + "/secret"), Op.getData(ROOT)));
        run("multiRead: one op", Arrays.asList(Op.getData(ROOT + "/a")));

        List<Op> creates = new ArrayList<>();
        for (CreateMode mode : CreateMode.values()) {
            String p = ROOT + "/m-" + mode.name().toLowerCase();
            creates.add(mode.isTTL()
                ? Op.create(p, "d".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, mode, 60000)
                : Op.create(p, "d".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, mode));
        }
        run("multi: a create of every mode", creates);
        run("multi: container alone", Arrays.asList(
            Op.create(ROOT + "/c1", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER)));
        run("multi: TTL alone", Arrays.asList(
            Op.create(ROOT + "/t1", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, 5000)));
        run("multi: create by flags, check, setData, delete", Arrays.asList(
            Op.create(ROOT + "/f0", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, 0),
            Op.create(ROOT + "/f4", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, 4),
            Op.check(ROOT + "/a", 0),
            Op.setData(ROOT + "/a", "A2".getBytes(), 0),
            Op.create(ROOT + "/f0/k", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL),
            Op.delete(ROOT + "/b", -1)));
        run("multi: failing op", Arrays.asList(
            Op.create(ROOT + "/x", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER),
            Op.create(ROOT + "/a", null, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
            Op.delete(ROOT + "/f0", -1)));

        // The session still works after all of it (keel once dropped the connection).
        System.out.println("children after: " + sorted(zk.getChildren(ROOT, false)));
        System.out.println("f0/k kids: " + zk.getChildren(ROOT + "/f0", false).size());
        zk.close();
    }

    static List<String> sorted(List<String> l) {
        List<String> out = new ArrayList<>(l);
        out.sort(null);
        return out;
    }

    static void run(String title, List<Op> ops) throws InterruptedException {
        System.out.println("== " + title);
        List<OpResult> results;
        try {
            results = zk.multi(ops);
        } catch (KeeperException e) {
            System.out.println("  threw " + e.code());
            results = e.getResults();
            if (results == null) {
                return;
            }
        }
        System.out.println("  " + results.size() + " results");
        for (OpResult r : results) {
            System.out.println("  " + show(r));
        }
    }

    static String show(OpResult r) {
        String head = r.getClass().getSimpleName() + " type=" + r.getType();
        if (r instanceof OpResult.CreateResult) {
            OpResult.CreateResult c = (OpResult.CreateResult) r;
            return head + " path=" + c.getPath() + " stat=" + show(c.getStat());
        }
        if (r instanceof OpResult.SetDataResult) {
            return head + " stat=" + show(((OpResult.SetDataResult) r).getStat());
        }
        if (r instanceof OpResult.GetDataResult) {
            OpResult.GetDataResult g = (OpResult.GetDataResult) r;
            byte[] d = g.getData();
            return head + " data=" + (d == null ? "null" : new String(d)) + " stat=" + show(g.getStat());
        }
        if (r instanceof OpResult.GetChildrenResult) {
            return head + " children=" + sorted(((OpResult.GetChildrenResult) r).getChildren());
        }
        if (r instanceof OpResult.ErrorResult) {
            return head + " err=" + ((OpResult.ErrorResult) r).getErr();
        }
        return head;
    }

    static String z(long zxid) {
        return zxid == 0 ? "0" : "+" + (zxid - base);
    }

    static String show(Stat s) {
        if (s == null) {
            return "null";
        }
        long owner = s.getEphemeralOwner();
        String o = owner == 0 ? "0" : owner == zk.getSessionId() ? "self" : "other";
        return "{c=" + z(s.getCzxid()) + " m=" + z(s.getMzxid()) + " p=" + z(s.getPzxid())
            + " ctime=" + (s.getCtime() > 0 ? "t" : "0") + " mtime=" + (s.getMtime() > 0 ? "t" : "0")
            + " v=" + s.getVersion() + " cv=" + s.getCversion() + " av=" + s.getAversion()
            + " owner=" + o + " len=" + s.getDataLength() + " kids=" + s.getNumChildren() + "}";
    }
}
