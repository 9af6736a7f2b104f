#include "run_models.h"
#include <cstdlib>

// Their main.cpp at e4fdbe7 (arguments, generator, calls) with two changes for fastpubsub's driver
// (benchmarks/peers/hem.py): the algorithms run are REIN, HEM5DD, TAMA and OpIndex, or those HEM_RUN lists
// (comma-separated), and the compile-time settings are printed first.
int main(int argc, char** argv)
{
	if (argc == 11)
	{
		expID = to_string(atoi(argv[1]));
		atts = atoi(argv[2]);
		cons = atoi(argv[3]);
		m = atoi(argv[4]);
		alpha = atof(argv[5]);
		width = atof(argv[6]);
		be = atoi(argv[7]);
		attrGroup = atoi(argv[8]);
		valDom = atoi(argv[9]);
		parallelDegree = atoi(argv[10]);
	}
	cout << "settings: subs= " << subs << " pubs= " << pubs << " buks= " << buks << " be= " << be << " level= " << level
		 << " segments= " << SEGMENTS << " signatures= " << MAX_SIGNATURE << endl;
	const char* chosen = getenv("HEM_RUN");
	string run = "," + string(chosen ? chosen : "rein,hem5dd,tama,opindex") + ",";

	intervalGenerator gen(subs, pubs, atts, attrGroup, cons, m, attNumType, attDis, valDis, valDom, alpha, subp, width);
	gen.GenSubList();
	gen.GenPubList();
	unordered_map<int, bool> deleteNo;

	if (run.find(",rein,") != string::npos) run_rein(gen, deleteNo);
	if (run.find(",hem5dd,") != string::npos) run_HEM5(gen, deleteNo);
	if (run.find(",tama,") != string::npos) run_tama_forward_native(gen, deleteNo);
	if (run.find(",opindex,") != string::npos) run_OpIndex(gen, deleteNo);
	cout << "Done.\n";
	return 0;
}
